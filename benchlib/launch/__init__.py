"""Starting ranks and watching them: command lines built and not run (argv), the rank
protocol between a worker and its launcher (protocol), the processes watched until the
first failure or the timeout (supervise), and `launcher.launch()`, which puts them
together for every way of starting ranks."""
