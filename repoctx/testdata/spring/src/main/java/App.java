class App {}
