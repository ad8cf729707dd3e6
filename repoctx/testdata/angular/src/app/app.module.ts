export class AppModule {}
