"""The measuring core: timing and statistics (timing), the training and traversal step
and epoch loops (loops), the models (models; the JAX ResNet in jaxresnet), what a run
reports (metrics), and the environment a record stores (envinfo, allocator)."""
