#!/usr/bin/env python3
"""accept-order-server.py N [--nonblocking]: a server whose output is its accept order.

Connects N clients to its own listener in order (client i sends "i"), then accepts N times
and prints the indices in the order accept() returned them: "0 1 2 ..." unless something
(bootsim shuffle, the accept interposer) reorders the accepts. With --nonblocking the listener
is non-blocking and waited on with poll(); each accept that finds nothing prints EAGAIN.
"""
import select
import socket
import sys


def main():
    n = int(sys.argv[1])
    nonblocking = "--nonblocking" in sys.argv[2:]
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    clients = [socket.create_connection(s.getsockname()) for _ in range(n)]
    for i, c in enumerate(clients):
        c.sendall(b"%d\n" % i)
    s.setblocking(not nonblocking)
    p = select.poll()
    p.register(s, select.POLLIN)
    out, accepted = [], 0
    while accepted < n:
        try:
            a, _ = s.accept()
        except BlockingIOError:
            out.append("EAGAIN")
            p.poll(5000)
            continue
        a.setblocking(True)
        out.append(a.recv(16).decode().strip())
        a.close()
        accepted += 1
    print(" ".join(out))


if __name__ == "__main__":
    main()
