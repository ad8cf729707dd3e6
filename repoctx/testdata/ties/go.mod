module example.com/t
