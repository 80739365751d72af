import Foundation
import Synchronization

/// The emulator's end of an `AcquireWrite`/`AcquireNotify` socket: one end of a
/// `SOCK_SEQPACKET` socketpair, non-blocking and close-on-exec as bluetoothd creates it
/// (bluez src/gatt-client.c `create_sock`; spec/bluez.md "Objects a client sees").
///
/// A thread waits on the descriptor: every packet read is handed to `onPacket`; when the peer
/// closes its end (the release), or ``shutdown()`` is called (link loss), the thread closes the
/// descriptor and calls `onClose` once. Only that thread closes it, so a concurrent ``send(_:)``
/// never writes to a reused descriptor number.
final class AcquiredSocket: Sendable {
    private struct State {
        var closed = false
        var shut = false
    }
    private let fd: Int32
    private let state = Mutex(State())

    private init(fd: Int32) { self.fd = fd }

    /// A new pair: the emulator's end and the descriptor to hand to the client (the caller owns
    /// it and closes it once it is in the reply).
    static func pair() -> (AcquiredSocket, Int32)? {
        var fds: [Int32] = [-1, -1]
        let type = Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &fds) == 0 else { return nil }
        return (AcquiredSocket(fd: fds[0]), fds[1])
    }

    /// Sends one packet (one notification value); false when the socket is released or the
    /// client's buffer is full (bluetoothd drops the value then too).
    func send(_ bytes: [UInt8]) -> Bool {
        state.withLock { s in
            guard !s.closed, !s.shut else { return false }
            let n = bytes.withUnsafeBytes { Foundation.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT)) }
            return n == bytes.count
        }
    }

    /// Ends the socket from the emulator's side (link loss, StopNotify): the client reads EOF.
    func shutdown() {
        state.withLock { s in
            guard !s.closed, !s.shut else { return }
            s.shut = true
            _ = Foundation.shutdown(fd, Int32(SHUT_RDWR))
        }
    }

    /// Closes a socket whose reader thread was never started.
    func discard() {
        state.withLock { s in
            guard !s.closed else { return }
            s.closed = true
            close(fd)
        }
    }

    /// Starts the reader thread.
    func run(onPacket: @escaping @Sendable ([UInt8]) -> Void, onClose: @escaping @Sendable () -> Void) {
        let fd = self.fd
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let r = poll(&p, 1, -1)  // shutdown() wakes it: the socket reads EOF
                if r < 0 {
                    if errno == EINTR { continue }
                    break
                }
                if r == 0 {
                    if state.withLock({ $0.shut }) { break }
                    continue
                }
                if p.revents & Int16(POLLIN) != 0 {
                    let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    if n > 0 {
                        onPacket(Array(buffer[..<n]))
                        continue
                    }
                    if n < 0, errno == EAGAIN || errno == EINTR { continue }
                    break  // 0: the peer closed (or we shut down)
                }
                if p.revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 { break }
            }
            state.withLock { s in
                s.closed = true
                close(fd)
            }
            onClose()
        }
    }
}
