"""One composite PTransform per DVC stage; siblings that share only the runtime."""
