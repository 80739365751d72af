import Foundation
import PacketSocket
import Reactor
import Synchronization
import TestSupport
import Testing

/// `PacketSocket.read(on:onPacket:onClose:)`: an acquired socket read on an event loop
/// (docs/bluez.md "On an event loop").
@Suite(.serialized, .timeLimit(.minutes(1))) struct PacketSocketLoopTests {
    final class Seen: Sendable {
        let packets = Mutex<[[UInt8]]>([])
        let onLoop = Mutex<[Bool]>([])
        let closes = Mutex(0)
    }

    static func read(_ socket: PacketSocket, on loop: EventLoop, into seen: Seen) {
        socket.read(on: loop, onPacket: { p in
            seen.packets.withLock { $0.append(p) }
            seen.onLoop.withLock { $0.append(loop.inLoop) }
        }, onClose: {
            seen.onLoop.withLock { $0.append(loop.inLoop) }
            seen.closes.withLock { $0 += 1 }
        })
    }

    @Test func packetsArriveWholeAndInOrderOnTheLoopThread() async throws {
        let loop = EventLoop(name: "t-ps-order")
        defer { loop.shutdown() }
        let (ours, theirsFD) = try #require(PacketSocket.pair())
        let theirs = PacketSocket(fd: theirsFD)
        let seen = Seen()
        Self.read(ours, on: loop, into: seen)
        // More than one wake-up's worth (64), sizes from 1 byte to 2 KiB.
        let sent = (0..<300).map { i in [UInt8](repeating: UInt8(i % 256), count: 1 + (i * 7) % 2048) }
        for p in sent {
            while let err = theirs.trySend(p) {
                #expect(err == EAGAIN)
                theirs.waitWritable(milliseconds: 50)
            }
        }
        #expect(await eventually { seen.packets.withLock { $0.count } == sent.count })
        #expect(seen.packets.withLock { $0 } == sent)
        #expect(seen.onLoop.withLock { $0.allSatisfy { $0 } })
        #expect(seen.closes.withLock { $0 } == 0)
        theirs.shutdown()
        #expect(await eventually { seen.closes.withLock { $0 } == 1 })
    }

    @Test func peerEOFClosesOnceAndLeavesNoWatch() async throws {
        let loop = EventLoop(name: "t-ps-eof")
        defer { loop.shutdown() }
        let (ours, theirsFD) = try #require(PacketSocket.pair())
        let seen = Seen()
        Self.read(ours, on: loop, into: seen)
        #expect(await eventuallyAsync { await loop.registrations().watches == 1 })
        #expect([UInt8]([7, 8]).withUnsafeBytes { write(theirsFD, $0.baseAddress, 2) } == 2)
        close(theirsFD)
        #expect(await eventually { seen.closes.withLock { $0 } == 1 })
        #expect(seen.packets.withLock { $0 } == [[7, 8]])
        #expect(seen.onLoop.withLock { $0 } == [true, true])
        #expect(await loop.registrations().watches == 0)
        // Our end is closed by the reader: sends fail, a second shutdown is harmless.
        #expect(ours.trySend([1]) == EPIPE)
        ours.shutdown()
        _ = await loop.registrations()  // read on the loop after what the shutdown queued there
        #expect(seen.closes.withLock { $0 } == 1)
    }

    @Test func shutdownFromAnotherThreadEndsTheReader() async throws {
        let loop = EventLoop(name: "t-ps-shutdown")
        defer { loop.shutdown() }
        let (ours, theirsFD) = try #require(PacketSocket.pair())
        defer { close(theirsFD) }
        let seen = Seen()
        Self.read(ours, on: loop, into: seen)
        #expect(await eventuallyAsync { await loop.registrations().watches == 1 })
        await Task.detached { ours.shutdown() }.value
        #expect(await eventually { seen.closes.withLock { $0 } == 1 })
        #expect(await loop.registrations().watches == 0)
        // The peer reads EOF.
        var byte: UInt8 = 0
        #expect(recv(theirsFD, &byte, 1, Int32(MSG_DONTWAIT)) == 0)
        // Reading an already shut socket: onClose at once, nothing watched.
        let (again, otherFD) = try #require(PacketSocket.pair())
        defer { close(otherFD) }
        again.shutdown()
        let late = Seen()
        Self.read(again, on: loop, into: late)
        #expect(late.closes.withLock { $0 } == 1)
        #expect(await loop.registrations().watches == 0)
    }
}
