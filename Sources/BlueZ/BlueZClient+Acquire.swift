import DBus
import PacketSocket
import Foundation
import Synchronization

/// How ``BlueZClient/notifications(_:using:)`` subscribes.
public enum NotifyMethod: Sendable, Equatable {
    /// `AcquireNotify` where the characteristic offers it (its `NotifyAcquired` property exists),
    /// `StartNotify` otherwise or when AcquireNotify answers `InProgress` (someone else holds a
    /// StartNotify session on it).
    case automatic
    /// Always `StartNotify` (values as `PropertiesChanged(Value)`).
    case startNotify
    /// Always `AcquireNotify` (values through the socket); fails where it is not offered.
    case acquireNotify
}

/// Notifications through an `AcquireNotify` socket (bluez doc/org.bluez.GattCharacteristic.rst;
/// spec/bluez.md "Objects a client sees").
public struct AcquiredNotifications: Sendable {
    /// One element per notification, read from the socket on the client's event loop. Finishes
    /// when BlueZ closes the socket (link loss, StopNotify) or after ``release()``; ending the
    /// iteration (cancel) releases too.
    public let values: AsyncStream<[UInt8]>
    /// The ATT MTU BlueZ answered with.
    public let mtu: Int
    let socket: PacketSocket

    /// Closes the socket: BlueZ ends the session (`NotifyAcquired` goes false).
    public func release() { socket.shutdown() }
}

/// A writer over an `AcquireWrite` socket: every ``write(_:)`` is one ATT Write Command of at
/// most ``maximumLength`` (MTU − 3) bytes. The socket is closed by ``release()`` or when the
/// writer goes away; BlueZ closes it on link loss (writes then fail `notConnected`).
public final class AcquiredWriter: Sendable {
    /// The ATT MTU BlueZ answered with.
    public let mtu: Int
    let socket: PacketSocket

    init(mtu: Int, socket: PacketSocket) {
        self.mtu = mtu
        self.socket = socket
    }

    /// The longest value one write carries (MTU − 3).
    public var maximumLength: Int { max(0, mtu - 3) }

    /// Sends one value. Longer than ``maximumLength`` → ``BlueZError/valueTooLong(length:maximum:)``
    /// (nothing sent); socket closed → ``BlueZError/notConnected(_:)``; the peer's buffer full for
    /// `timeout` → ``BlueZError/timeout(_:)``.
    public func write(_ value: [UInt8], timeout: Duration = .seconds(2)) throws(BlueZError) {
        guard value.count <= maximumLength else { throw .valueTooLong(length: value.count, maximum: maximumLength) }
        try socket.send(value, timeout: timeout)
    }

    /// Closes the socket: BlueZ releases the characteristic (`WriteAcquired` goes false).
    public func release() { socket.shutdown() }

    deinit { socket.shutdown() }
}

/// The client's end of an acquired socket (``PacketSocket``), with a bounded wait when the
/// peer's buffer is full.
extension PacketSocket {
    func send(_ bytes: [UInt8], timeout: Duration) throws(BlueZError) {
        let deadline = ContinuousClock.now + timeout
        while true {
            switch trySend(bytes) {
            case nil: return
            case EINTR?: continue
            case EAGAIN?:
                guard ContinuousClock.now < deadline else { throw .timeout("acquired write socket full") }
                waitWritable(milliseconds: 20)
            case EMSGSIZE?: throw .failed(name: "socket", message: "short write of a \(bytes.count)-byte value")
            case let err?: throw .notConnected("acquired write socket closed (errno \(err))")
            }
        }
    }
}

extension BlueZClient {
    /// `AcquireWrite`: a socket whose packets BlueZ sends as Write Commands (the characteristic
    /// needs write-without-response). Errors as bluetoothd 5.66: `notPermitted` ("Write
    /// acquired") when already acquired, `notSupported` without the flag, `notConnected` before
    /// ServicesResolved.
    public func acquireWrite(_ characteristic: BlueZCharacteristic, timeout: Duration? = nil) async throws(BlueZError)
        -> AcquiredWriter
    {
        let (fd, mtu) = try await acquire(characteristic, "AcquireWrite", timeout: timeout)
        return AcquiredWriter(mtu: mtu, socket: PacketSocket(fd: fd))
    }

    /// `AcquireNotify`: the characteristic's notifications through a socket instead of
    /// `PropertiesChanged` (no read echoes there). Errors as bluetoothd 5.66: `notPermitted`
    /// ("Notify acquired") when already acquired, `inProgress` when a StartNotify session exists,
    /// `notSupported` without the notify flag. Also ended by ``stopNotifications(_:)`` and
    /// ``close()``.
    ///
    /// With `onValue`, each value is handed to it on the client's event loop thread (which reads
    /// the socket), in order, and
    /// `values` carries none (it still finishes when the socket closes; keep it referenced, since
    /// dropping it releases the socket).
    public func acquireNotify(_ characteristic: BlueZCharacteristic, timeout: Duration? = nil,
                              onValue: (@Sendable ([UInt8]) -> Void)? = nil) async throws(BlueZError)
        -> AcquiredNotifications
    {
        let (fd, mtu) = try await acquire(characteristic, "AcquireNotify", timeout: timeout)
        let socket = PacketSocket(fd: fd)
        let (values, continuation) = AsyncStream<[UInt8]>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let path = characteristic.path
        let id = store.withLock { s -> UInt64? in
            guard !s.closed else { return nil }
            let id = s.id()
            s.acquired[id] = (path, socket)
            return id
        }
        guard let id else {
            socket.shutdown()
            throw .bus(.disconnected)
        }
        continuation.onTermination = { [weak self] _ in
            socket.shutdown()
            _ = self?.store.withLock { $0.acquired.removeValue(forKey: id) }
        }
        let onPacket: @Sendable ([UInt8]) -> Void = onValue ?? { continuation.yield($0) }
        socket.read(on: loop, onPacket: onPacket, onClose: { continuation.finish() })
        return AcquiredNotifications(values: values, mtu: mtu, socket: socket)
    }

    /// Whether BlueZ offers AcquireNotify on the characteristic (its `NotifyAcquired` exists).
    public func offersAcquireNotify(_ characteristic: BlueZCharacteristic) -> Bool {
        object(characteristic.path)?[Self.char1]?["NotifyAcquired"] != nil
    }

    func acquire(_ c: BlueZCharacteristic, _ method: String, timeout: Duration?) async throws(BlueZError) -> (Int32, Int) {
        let reply = try await call(c.path, Self.char1, method, [.properties([:])], timeout: timeout)
        do {
            let handle = try reply.decode(0, as: DBusUnixFD.self)
            let mtu = try reply.decode(1, as: UInt16.self)
            // Our own descriptor; the message's copy closes with the reply.
            return (try handle.duplicate(), Int(mtu))
        } catch {
            throw .failed(name: "org.bluez.Error.Failed", message: "\(method) answered \(reply.signature)")
        }
    }
}
