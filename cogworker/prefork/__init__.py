"""The prefork worker: one master supervising N forked, shared-nothing children."""
