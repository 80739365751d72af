import CDBus

extension DBusConnection {
    /// Subscribes to signals matching `rule` (D-Bus Specification, "Match Rules").
    ///
    /// The subscription exists locally and the bus has acknowledged `AddMatch` before this
    /// returns, so a signal caused by anything the caller does afterwards is not lost. The match
    /// is removed (`RemoveMatch`) when the stream and its iterators are dropped or the iterating
    /// task is cancelled. When the connection ends the stream throws ``DBusError/disconnected``.
    /// At most `bufferLimit` undelivered signals are kept; beyond that the oldest are dropped.
    public func signals(matching rule: DBusMatchRule, bufferLimit: Int = 1024,
                        timeout: Duration = DBusConnection.defaultTimeout) async throws(DBusError) -> DBusSignalStream
    {
        try rule.validate()
        let (stream, continuation) = AsyncThrowingStream<DBusMessage, any Error>.makeStream(
            bufferingPolicy: .bufferingNewest(max(1, bufferLimit)))
        let b = box
        let id = b.state.withLock { s -> UInt64? in
            guard !s.closed else { return nil }
            let id = s.makeID()
            s.subscriptions[id] = ConnectionBox.Subscription(rule: rule, continuation: continuation, senderOwner: nil)
            return id
        }
        guard let id else { throw .disconnected }
        let token = SubscriptionToken(box: b, id: id)
        continuation.onTermination = { _ in b.unsubscribe(id) }
        do {
            if let sender = rule.sender, !sender.hasPrefix(":"), sender != "org.freedesktop.DBus" {
                // Track the owner of a well-known sender name: the bus delivers signals from the
                // unique name, so local routing needs to know it.
                _ = try await busCall("AddMatch", [.string(ownerRule(sender))], timeout: timeout)
                let owner = try await nameOwner(sender, timeout: timeout)
                b.state.withLock { $0.subscriptions[id]?.senderOwner = owner }
            }
            _ = try await busCall("AddMatch", [.string(rule.ruleString)], timeout: timeout)
        } catch {
            b.unsubscribe(id)
            throw error
        }
        return DBusSignalStream(stream: stream, token: token)
    }

    /// Runs `body` with a signal stream and removes the match when `body` returns.
    public func withSignals<R: Sendable>(
        matching rule: DBusMatchRule, _ body: (DBusSignalStream) async throws -> R
    ) async throws -> R {
        let stream = try await signals(matching: rule)
        defer { stream.token.cancel() }
        return try await body(stream)
    }
}

func ownerRule(_ name: String) -> String { DBusMatchRule.nameOwnerChanged(name).ruleString }

extension ConnectionBox {
    /// Removes a subscription (idempotent): ends its stream and sends `RemoveMatch`.
    func unsubscribe(_ id: UInt64) {
        let removed = state.withLock { s -> Subscription? in s.subscriptions.removeValue(forKey: id) }
        guard let removed else { return }
        removed.continuation.finish()
        var rules = [removed.rule.ruleString]
        if let sender = removed.rule.sender, !sender.hasPrefix(":"), sender != "org.freedesktop.DBus" {
            rules.append(ownerRule(sender))
        }
        for rule in rules {
            if let msg = try? MessageBuilder.methodCall(
                destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                member: "RemoveMatch", arguments: [.string(rule)])
            {
                dbus_message_set_no_reply(msg, 1)
                try? send(msg)
            }
        }
    }

    /// Routes a received signal to the matching subscriptions (the loop).
    func deliverSignal(_ m: DBusMessage) {
        if m.sender == "org.freedesktop.DBus", m.interface == "org.freedesktop.DBus", m.member == "NameOwnerChanged",
           m.body.count == 3, case let .string(name) = m.body[0], case let .string(newOwner) = m.body[2]
        {
            state.withLock { s in
                for (id, sub) in s.subscriptions where sub.rule.sender == name {
                    s.subscriptions[id]?.senderOwner = newOwner.isEmpty ? nil : newOwner
                }
            }
        }
        let targets = state.withLock { s in
            s.subscriptions.values.filter { $0.rule.matches(m, senderOwner: $0.senderOwner) }.map(\.continuation)
        }
        for c in targets { c.yield(m) }
    }
}

/// Removes its subscription when the last copy of the stream (and its iterators) is gone.
final class SubscriptionToken: Sendable {
    let box: ConnectionBox
    let id: UInt64
    init(box: ConnectionBox, id: UInt64) {
        self.box = box
        self.id = id
    }
    func cancel() { box.unsubscribe(id) }
    deinit { box.unsubscribe(id) }
}

/// Signals matching one rule, in arrival order (see ``DBusConnection/signals(matching:bufferLimit:timeout:)``).
public struct DBusSignalStream: AsyncSequence, Sendable {
    public typealias Element = DBusMessage
    public typealias Failure = DBusError

    let stream: AsyncThrowingStream<DBusMessage, any Error>
    let token: SubscriptionToken

    /// Ends the subscription now (also happens when the stream is dropped).
    public func cancel() { token.cancel() }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: stream.makeAsyncIterator(), token: token)
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<DBusMessage, any Error>.AsyncIterator
        let token: SubscriptionToken

        public mutating func next() async throws(DBusError) -> DBusMessage? {
            do {
                return try await base.next()
            } catch {
                throw (error as? DBusError) ?? .cancelled
            }
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(DBusError) -> DBusMessage? {
            do {
                return try await base.next(isolation: actor)
            } catch {
                throw (error as? DBusError) ?? .cancelled
            }
        }
    }
}
