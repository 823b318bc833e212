"""The environment every host-side launch of a sandbox starts with: no host variable, so no process of
a sandbox's launch (the launcher, bwrap, the command bwrap starts with a cleared environment) holds a host
secret. Its own module so that the shell can use it without importing a backend."""

LAUNCH_ENV = {"PATH": "/usr/bin:/bin"}
