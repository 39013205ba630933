//! Tests over real namespaces and TUN devices; each returns early, saying why, when the
//! process cannot run a wire (no CAP_NET_ADMIN or no /dev/net/tun).

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use super::*;

fn available() -> bool {
    crate::skip::wire_can_run()
}

/// Host `server` echoes one message from each of the other hosts.
fn echo_server(wire: &Wire, server: u8, clients: usize) -> HostTask<std::io::Result<Vec<u8>>> {
    let (ready_tx, ready_rx) = mpsc::channel();
    let task = wire
        .spawn(server, move || {
            let l = TcpListener::bind(SocketAddrV4::new(host_addr(server), 7100))?;
            let _ = ready_tx.send(());
            let mut firsts = Vec::new();
            for _ in 0..clients {
                let (mut s, _) = l.accept()?;
                let mut b = [0u8; 1];
                s.read_exact(&mut b)?;
                s.write_all(&b)?;
                firsts.push(b[0]);
            }
            Ok(firsts)
        })
        .unwrap();
    ready_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    task
}

fn echo_client(wire: &Wire, from: u8, to: u8) -> HostTask<std::io::Result<u8>> {
    wire.spawn(from, move || {
        let mut s = TcpStream::connect_timeout(&SocketAddrV4::new(host_addr(to), 7100).into(), Duration::from_secs(3))?;
        s.set_read_timeout(Some(Duration::from_secs(3)))?;
        s.write_all(&[from])?;
        let mut b = [0u8; 1];
        s.read_exact(&mut b)?;
        Ok(b[0])
    })
    .unwrap()
}

#[test]
fn three_hosts_route_by_destination() {
    if !available() {
        return;
    }
    let wire = Wire::start(3, Policy::NONE).unwrap();
    let server = echo_server(&wire, 3, 2);
    for from in [1, 2] {
        assert_eq!(echo_client(&wire, from, 3).join().unwrap().unwrap(), from);
    }
    let mut firsts = server.join().unwrap().unwrap();
    firsts.sort_unstable();
    assert_eq!(firsts, vec![1, 2]);
    let report = wire.shutdown().unwrap();
    assert_eq!(report.connections, 2);
    assert_eq!(report.count(|e| *e == WireEvent::Passed), 2);
    assert_eq!(report.counters.write_errors, 0);
}

#[test]
fn held_connection_still_completes_and_is_logged() {
    if !available() {
        return;
    }
    let wire = Wire::start(2, "hold=30ms".parse().unwrap()).unwrap();
    let server = echo_server(&wire, 2, 1);
    let started = std::time::Instant::now();
    assert_eq!(echo_client(&wire, 1, 2).join().unwrap().unwrap(), 1);
    assert!(started.elapsed() >= Duration::from_millis(30));
    server.join().unwrap().unwrap();
    let report = wire.shutdown().unwrap();
    let held: Vec<_> = report
        .decisions
        .iter()
        .filter(|d| matches!(d.event, WireEvent::Held { .. } | WireEvent::Released { .. }))
        .collect();
    assert_eq!(held.len(), 2, "{:?}", report.decisions);
    assert_eq!(held[0].flow.src_host, 1);
    assert_eq!(held[0].flow.dst_host, 2);
}

#[test]
fn bad_host_numbers_are_errors() {
    assert!(matches!(Wire::start(0, Policy::NONE), Err(WireError::Config(_))));
    if !available() {
        return;
    }
    let wire = Wire::start(1, Policy::NONE).unwrap();
    assert!(matches!(wire.spawn(2, || ()), Err(WireError::NoSuchHost(2))));
    assert!(matches!(wire.spawn(0, || ()), Err(WireError::NoSuchHost(0))));
    assert_eq!(wire.spawn(1, || 7).unwrap().join().unwrap(), 7);
    wire.shutdown().unwrap();
}
