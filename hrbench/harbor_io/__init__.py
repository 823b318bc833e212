"""Harbor runs in and out: job folders read as trials (`jobs`), checkpoint trials written as Harbor tasks
(`export`)."""
