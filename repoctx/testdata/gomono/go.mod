module example.com/tool
