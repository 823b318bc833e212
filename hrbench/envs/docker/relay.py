#!/usr/bin/env python3
# The persistent shell's host side: a process piping its stdin and stdout to a started exec's
# hijacked connection (Docker's raw stream: 8-byte frame headers on the way out). Plain sockets
# and the standard library only, run with `python -I -S`: it starts in a few hundredths of a
# second, where importing the Docker SDK (and hrbench) took about a second of CPU per shell.
# argv: unix|tcp, socket path or host:port, the request path.
import os, socket, sys, threading


def main() -> None:
    kind, where, path = sys.argv[1:4]
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX)
        s.connect(where)
    else:
        host, _, port = where.rpartition(":")
        s = socket.create_connection((host, int(port)))
    body = b'{"Detach": false, "Tty": false}'
    s.sendall(("POST %s HTTP/1.1\r\nHost: docker\r\nContent-Type: application/json\r\nConnection: Upgrade\r\n"
               "Upgrade: tcp\r\nContent-Length: %d\r\n\r\n" % (path, len(body))).encode() + body)
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("hrbench: the Docker API closed the shell's connection: %r" % buf[:300])
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    if head.split(b" ", 2)[1] not in (b"101", b"200"):
        sys.exit("hrbench: the Docker API refused the shell's exec: %r" % head[:300])

    def feed():
        try:
            while data := os.read(0, 65536):
                s.sendall(data)
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    threading.Thread(target=feed, daemon=True).start()
    while True:
        while len(buf) >= 8 and len(buf) >= 8 + int.from_bytes(buf[4:8], "big"):
            end = 8 + int.from_bytes(buf[4:8], "big")
            view = memoryview(buf)[8:end]
            while view:
                view = view[os.write(1, view):]
            buf = buf[end:]
        try:
            chunk = s.recv(65536)
        except OSError:
            chunk = b""
        if not chunk:
            break
        buf += chunk


if __name__ == "__main__":  # a script run by path; importing it (the boundary test does) runs nothing
    main()
