import Foundation
import Reactor
import Synchronization

/// One end of a `SOCK_SEQPACKET` Unix socket, as BlueZ hands out for `AcquireWrite` and
/// `AcquireNotify` (bluez doc/org.bluez.GattCharacteristic.rst; spec/bluez.md "Objects a client
/// sees"): one packet per GATT value. Used by the BlueZ client (its end of an acquired socket)
/// and by the emulator (bluetoothd's end).
///
/// An event loop's watch (``read(on:onPacket:onClose:)``) hands every packet to `onPacket`; when
/// the peer closes its end or ``shutdown()`` is called, the reader closes the descriptor and
/// calls `onClose` once. Only one party closes the descriptor — the reader, or ``shutdown()``
/// when there is none — and sends happen under the same lock, so a send never writes to a
/// reused descriptor number.
public final class PacketSocket: Sendable {
    private struct State {
        var closed = false
        var shut = false
        var reading = false
    }
    private let fd: Int32
    private let state = Mutex(State())

    /// Takes ownership of `fd`.
    public init(fd: Int32) { self.fd = fd }

    /// A new non-blocking, close-on-exec pair (as bluetoothd creates it): this end, and the
    /// descriptor of the other end for the caller to hand over (and close).
    public static func pair() -> (PacketSocket, Int32)? {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &fds) == 0 else { return nil }
        return (PacketSocket(fd: fds[0]), fds[1])
    }

    /// Sends one packet without blocking: `nil` when it went out whole, else the `errno`
    /// (`EAGAIN`: the peer's buffer is full; `EPIPE`: this end is shut or closed).
    public func trySend(_ bytes: [UInt8]) -> Int32? {
        state.withLock { s -> Int32? in
            guard !s.closed, !s.shut else { return EPIPE }
            let n = bytes.withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
            if n == bytes.count { return nil }
            return n < 0 ? errno : EMSGSIZE
        }
    }

    /// Waits up to `milliseconds` for room to send.
    public func waitWritable(milliseconds: Int32) {
        var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        _ = poll(&p, 1, milliseconds)
    }

    /// Ends the socket: the peer reads EOF. Closes the descriptor at once when no reader owns
    /// it (the reader closes it otherwise, on its loop).
    public func shutdown() {
        state.withLock { s in
            guard !s.closed, !s.shut else { return }
            s.shut = true
            _ = Foundation.shutdown(fd, Int32(SHUT_RDWR))
            if !s.reading {
                s.closed = true
                close(fd)
            }
        }
    }

    /// Makes the caller the reader, the one owner of the descriptor from now on; false when the
    /// socket is already shut or closed.
    private func becomeReader() -> Bool {
        state.withLock { s -> Bool in
            guard !s.closed, !s.shut else { return false }
            s.reading = true
            return true
        }
    }

    /// The reader closes the descriptor (under the lock sends take, so no send hits a reused
    /// descriptor number).
    private func closeAsReader() {
        state.withLock { s in
            s.closed = true
            close(fd)
        }
    }

    /// Reads packets on `loop` (docs/bluez.md "On an event loop"): the descriptor is watched
    /// there and every packet is handed to `onPacket` on the loop thread, in order. At EOF — the peer closed its end, or ``shutdown()`` was called (from any
    /// thread) — the loop stops watching, closes the descriptor (it is then its one owner) and
    /// calls `onClose` once, on the loop thread. Already shut: `onClose` runs at once. The
    /// handlers must not block. The loop must outlive the socket's reading.
    public func read(on loop: EventLoop, onPacket: @escaping @Sendable ([UInt8]) -> Void,
                     onClose: @escaping @Sendable () -> Void)
    {
        guard becomeReader() else {
            onClose()
            return
        }
        // Registered on the loop thread, so the handler cannot run before it knows its watch.
        let register: @Sendable () -> Void = { [self] in
            let slot = Mutex<EventLoop.Watch?>(nil)
            // `unowned`: the loop holds this handler (through the watch) and runs it only while it lives.
            let watch = loop.watch(fd, for: .readable) { [self, unowned loop] _ in
                guard loop.withReceiveBuffer({ readAvailable(into: $0, onPacket) }) else { return }
                slot.withLock { $0 }?.cancel()
                closeAsReader()
                onClose()
            }
            slot.withLock { $0 = watch }
        }
        if loop.inLoop { register() } else { loop.execute(register) }
    }

    /// Receives one packet per readiness (the loop's watch is level-triggered: a packet still
    /// queued is reported by its next `epoll_wait`, which it makes anyway before sleeping; reading
    /// on until `EAGAIN` would cost a system call per notification for nothing, as a device's
    /// notifications come one at a time); true at EOF or on an error that ends the socket.
    private func readAvailable(into buffer: UnsafeMutableRawBufferPointer, _ onPacket: @Sendable ([UInt8]) -> Void) -> Bool {
        var packets = 0
        while packets < 1 {
            let n = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
            if n > 0 {
                packets += 1
                onPacket(Array(UnsafeRawBufferPointer(rebasing: buffer[..<n])))
                continue
            }
            if n < 0, errno == EINTR { continue }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK { return false }
            return true  // 0: the peer closed (or we shut down); or a socket error
        }
        return false
    }
}
