export class AppComponent {}
