module example.com/v
