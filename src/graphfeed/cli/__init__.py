"""The ``graphfeed`` command line. Each subcommand is a module with ``add_parser`` and ``run``;
modules import heavy dependencies inside ``run`` so ``graphfeed --help`` stays fast."""
