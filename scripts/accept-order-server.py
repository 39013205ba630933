#!/usr/bin/env python3
"""accept-order-server.py N [--nonblocking [--epoll]]: a server whose output is its accept order.

Connects N clients to its own listener in order (client i sends "i"), then accepts N times
and prints the indices in the order accept() returned them: "0 1 2 ..." unless something
(bootsim shuffle, the accept interposer) reorders the accepts. With --nonblocking the listener
is non-blocking and waited on with poll() (or epoll with --epoll, edge-triggered as tokio's);
each accept that finds nothing prints EAGAIN.
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
    # Wait for the listener at most 20 s (epoll's timeout is in seconds, poll's in ms).
    if "--epoll" in sys.argv[2:]:
        p = select.epoll()
        p.register(s, select.EPOLLIN | select.EPOLLET)
        wait = lambda: p.poll(20)
    else:
        p = select.poll()
        p.register(s, select.POLLIN)
        wait = lambda: p.poll(20000)
    out, accepted = [], 0
    while accepted < n:
        try:
            a, _ = s.accept()
        except BlockingIOError:
            out.append("EAGAIN")
            wait()
            continue
        a.setblocking(True)
        out.append(a.recv(16).decode().strip())
        a.close()
        accepted += 1
    print(" ".join(out))


if __name__ == "__main__":
    main()
