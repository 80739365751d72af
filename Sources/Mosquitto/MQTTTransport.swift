/// The MQTT side of the bridge, as the bridge core sees it. `MQTTClient` implements it over
/// libmosquitto; tests of the core can implement it with an in-process fake.
public protocol MQTTTransport: AnyObject, Sendable {
    /// Publishes one message (MQTT 5 §3.3). Returns when it is written (QoS 0) or
    /// acknowledged by the broker (PUBACK for QoS 1, PUBCOMP for QoS 2).
    func publish(topic: String, payload: [UInt8], qos: MQTTQoS, retain: Bool, properties: MQTTPublishProperties)
        async throws(MQTTError)
    /// Subscribes (MQTT 5 §3.8) and returns the messages matching `filter` once the broker
    /// granted the subscription.
    func subscribe(_ filter: String, qos: MQTTQoS, options: MQTTSubscribeOptions) async throws(MQTTError)
        -> MQTTSubscription
    /// Ends every local subscription to `filter` and unsubscribes at the broker (MQTT 5 §3.10).
    func unsubscribe(_ filter: String) async throws(MQTTError)
    /// A new stream of connection events for one consumer.
    func connectionEvents() -> AsyncStream<MQTTConnectionEvent>
}

extension MQTTTransport {
    /// Publishes with no MQTT 5 properties.
    public func publish(topic: String, payload: [UInt8], qos: MQTTQoS = .atMostOnce, retain: Bool = false)
        async throws(MQTTError)
    {
        try await publish(topic: topic, payload: payload, qos: qos, retain: retain, properties: MQTTPublishProperties())
    }

    /// Subscribes with default MQTT 5 subscription options.
    public func subscribe(_ filter: String, qos: MQTTQoS = .atLeastOnce) async throws(MQTTError) -> MQTTSubscription {
        try await subscribe(filter, qos: qos, options: MQTTSubscribeOptions())
    }

    /// Scoped subscription (as mqtt-nio's `subscribe(to:process:)`): runs `body` with the
    /// subscription and unsubscribes when it returns or throws.
    public func withSubscription<Result: Sendable>(
        _ filter: String, qos: MQTTQoS = .atLeastOnce, options: MQTTSubscribeOptions = MQTTSubscribeOptions(),
        _ body: (MQTTSubscription) async throws -> Result
    ) async throws -> Result {
        let subscription = try await subscribe(filter, qos: qos, options: options)
        do {
            let result = try await body(subscription)
            try? await subscription.unsubscribe()
            return result
        } catch {
            try? await subscription.unsubscribe()
            throw error
        }
    }
}

/// The messages of one subscription, in arrival order, buffered up to the client's
/// `inboundBufferLimit` (then `inboundOverflow` applies). The sequence ends when the
/// subscription is removed or the client stops; dropping the last iterator unsubscribes.
public struct MQTTSubscription: AsyncSequence, Sendable {
    public typealias Element = MQTTMessage

    /// The filter as subscribed.
    public let filter: String
    /// The QoS the broker granted (MQTT 5 §3.9.3).
    public let grantedQoS: MQTTQoS
    private let stream: AsyncStream<MQTTMessage>
    private let unsubscribeAction: @Sendable () async throws(MQTTError) -> Void

    /// Makes a subscription; fakes of `MQTTTransport` use this too.
    public init(
        filter: String, grantedQoS: MQTTQoS, stream: AsyncStream<MQTTMessage>,
        unsubscribe: @escaping @Sendable () async throws(MQTTError) -> Void
    ) {
        self.filter = filter
        self.grantedQoS = grantedQoS
        self.stream = stream
        self.unsubscribeAction = unsubscribe
    }

    public func makeAsyncIterator() -> AsyncStream<MQTTMessage>.Iterator { stream.makeAsyncIterator() }

    /// Ends this subscription (the sequence finishes) and unsubscribes at the broker unless
    /// another subscription of the same client uses the same filter.
    public func unsubscribe() async throws(MQTTError) { try await unsubscribeAction() }
}
