raise RuntimeError("this app module is broken")
