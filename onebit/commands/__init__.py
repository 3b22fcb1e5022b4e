"""One module per `onebit` sub-command."""
