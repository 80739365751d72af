import Foundation
import TestSupport
import Testing
@testable import DBus

/// `h` ownership (docs/dbus.md "Values"): what AcquireWrite/AcquireNotify's "the fd closed =
/// release" needs — no hidden copy of a passed descriptor survives in the sender or the
/// receiver, so closing the receiver's own copy is seen by the peer as EOF.
@Suite(.timeLimit(.minutes(1))) struct UnixFDOwnershipTests {
    /// Waits up to 2 s for `fd` to become readable; returns what one read gave (nil: nothing).
    func readOnce(_ fd: Int32) -> Int? {
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&p, 1, 2000) == 1 else { return nil }
        var buf = [UInt8](repeating: 0, count: 64)
        return read(fd, &buf, buf.count)
    }

    @Test func closingTheReceivedDescriptorIsSeenByThePeer() async throws {
        try await withBus { bus, loop in
            let sockets = AcquiredSockets()
            let server = try await EchoServer.start(bus, loop: loop, sockets: sockets)
            defer { server.close() }
            let client = try await bus.connect(loop: loop)
            defer { client.close() }
            var mine: Int32 = -1
            do {
                let reply = try await client.echo("AcquireWrite", [[String: DBusValue]().dbusValue])
                let fd = try reply.decode(0, as: DBusUnixFD.self)
                // Received descriptors are close-on-exec: they do not leak into child processes.
                #expect(fcntl(fd.fileDescriptor, F_GETFD) & FD_CLOEXEC != 0)
                mine = try fd.duplicate()
                #expect(fcntl(mine, F_GETFD) & FD_CLOEXEC != 0)
            }  // the reply and its DBusUnixFD are gone: their copies are closed
            let serverEnd = try #require(sockets.take())
            var byte: [UInt8] = [7]
            #expect(write(mine, &byte, 1) == 1)
            #expect(readOnce(serverEnd.fileDescriptor) == 1)
            // Our duplicate is now the only copy of the client end, in either process role:
            // closing it is EOF for the server (neither the reply message nor the server's
            // returned value kept one).
            close(mine)
            #expect(readOnce(serverEnd.fileDescriptor) == 0)
        }
    }

    @Test func theSenderKeepsItsOwnDescriptor() async throws {
        try await withBus { bus, loop in
            let server = try await EchoServer.start(bus, loop: loop)
            defer { server.close() }
            let client = try await bus.connect(loop: loop)
            defer { client.close() }
            var pair: [Int32] = [-1, -1]
            #expect(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue), 0, &pair) == 0)
            let sent = DBusUnixFD(taking: pair[0])
            let peer = DBusUnixFD(taking: pair[1])
            var echoed: DBusUnixFD?
            do {
                let reply = try await client.echo("Echo", [.variant(.unixFD(sent))])
                guard case let .variant(.unixFD(back))? = reply.body.first else {
                    Issue.record("no fd back: \(reply)")
                    return
                }
                echoed = back
            }
            // Both the original and the echoed copy work.
            var byte: [UInt8] = [1]
            #expect(write(sent.fileDescriptor, &byte, 1) == 1)
            #expect(readOnce(peer.fileDescriptor) == 1)
            #expect(write(try #require(echoed).fileDescriptor, &byte, 1) == 1)
            #expect(readOnce(peer.fileDescriptor) == 1)
            // Dropping the echoed copy leaves the original open.
            echoed = nil
            #expect(write(sent.fileDescriptor, &byte, 1) == 1)
            #expect(readOnce(peer.fileDescriptor) == 1)
        }
    }
}
