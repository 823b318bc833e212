"""The environment every host-side launch of a sandbox starts with: no host variable, so the sandbox's
pid 1 holds no host secret. Its own module so that the shell can use it without importing a backend."""

LAUNCH_ENV = {"PATH": "/usr/bin:/bin"}
