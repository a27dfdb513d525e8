"""ltr: the core library and the training side ("learning to track")."""
