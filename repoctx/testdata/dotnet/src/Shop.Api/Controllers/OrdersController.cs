class OrdersController {}
