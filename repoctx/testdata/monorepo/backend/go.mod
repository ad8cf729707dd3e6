module example.com/backend
