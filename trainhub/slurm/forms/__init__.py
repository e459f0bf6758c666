"""Browser forms of the Slurm pages, one module per page group. They turn text into what the
services take; every Slurm rule stays in the services, whose errors are shown on the fields."""
