"""Exporting a result set to where teams already look (MLflow, TensorBoard, Bencher's BMF,
github-action-benchmark) with its intervals, n and testbed kept: the records chosen, the
figures each says, one module per target."""
