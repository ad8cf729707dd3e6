import django
