var app = 1;
