import BinaryCoding

// A passive device (`profile: advertisement`, docs/configuration.md "Passive devices") is never
// connected: its readings come from its advertisements. The profile decodes them (its
// ``PassiveDecoder``, over the device's format and key); ``PassiveTracker`` decides, on the
// bridge's clock, what the bridge does with each reading: drop a repeat, refuse a replay, publish
// on change at most every `min_interval` (the newest held reading wins), and go offline after
// the device's silence. Pure: no I/O, the time is given.

/// What a passive device's format read from one advertisement.
public struct PassiveReading: Sendable, Equatable {
    /// Measurement name → value (docs/advertisements.md).
    public var values: JSONObject
    /// The same id as the last accepted reading: a repeat, dropped.
    public var packetID: UInt32?
    /// An encrypted format's counter: must grow (a replay is refused).
    public var counter: UInt32?

    public init(values: JSONObject, packetID: UInt32? = nil, counter: UInt32? = nil) {
        self.values = values
        self.packetID = packetID
        self.counter = counter
    }
}

/// Why an advertisement of a passive device was not read (its format's error, as text).
public struct PassiveDecodeError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A passive device's decoder: its format with its key (``DeviceProfile/makeDecoder(for:)``).
public protocol PassiveDecoder: Sendable {
    /// The reading; nil when the advertisement is not of the device's format (ignored). Throws
    /// when it is but cannot be read (counted and reported, never fatal). Pure: the same address,
    /// name, service data and manufacturer data give the same result (``LastDecoded`` relies on it).
    func decode(_ advertisement: Advertisement) throws(PassiveDecodeError) -> PassiveReading?
    /// A check value of the device's key (nil: it has none), stored with the last accepted
    /// counter: a counter stored under another key is not this key's (a replaced sensor).
    var keyCheck: Int64? { get }
}

extension PassiveDecoder {
    public var keyCheck: Int64? { nil }
}

/// A passive device's decoder with the last advertisement it read. BlueZ reports every
/// advertisement (duplicates included) and a sensor sends each reading several times, so most
/// advertisements carry the bytes of the one before: those get the reading decoded then, not
/// decoded again (a layout format's decode is most of the bridge's work per advertisement,
/// docs/benchmarks.md). Errors and advertisements of another format are not kept.
public struct LastDecoded: Sendable {
    public let decoder: any PassiveDecoder
    var last: Advertisement?
    var reading: PassiveReading?

    public init(_ decoder: any PassiveDecoder) { self.decoder = decoder }

    public mutating func decode(_ ad: Advertisement) throws(PassiveDecodeError) -> PassiveReading? {
        if let last, let reading, last.serviceData == ad.serviceData, last.manufacturerData == ad.manufacturerData,
           last.address == ad.address, last.name == ad.name {
            return reading
        }
        guard let decoded = try decoder.decode(ad) else { return nil }
        last = ad
        reading = decoded
        return decoded
    }
}

/// The publish decisions of one passive device (see the file's comment).
public struct PassiveTracker: Sendable, Equatable {
    /// What one reading came to.
    public enum Outcome: Sendable, Equatable {
        /// Publish this state now.
        case publish(JSONObject)
        /// Changed, but within `min_interval` of the last publish: held (``tick(at:)`` publishes it).
        case held
        /// The same values as published: nothing to do.
        case unchanged
        /// The same packet id as the last accepted reading.
        case repeated
        /// A counter below the last accepted one: a replayed advertisement, refused (the same
        /// counter again is `repeated`: sensors send each advertisement several times).
        case replayed(counter: UInt32)
    }

    /// What the passing of time came to.
    public enum Due: Sendable, Equatable {
        case publish(JSONObject)
        /// No good advertisement for the device's silence: `offline`.
        case offline
    }

    public let minInterval: Duration
    public let silence: Duration
    /// The last state published (or restored from the store).
    public private(set) var state: JSONObject
    /// A changed state held back by `min_interval` (only the newest is kept).
    public private(set) var pending: JSONObject?
    public private(set) var lastPacketID: UInt32?
    /// The last accepted counter (the session stores it with the state, BridgeStore's
    /// `passiveCounter`, and `init` takes it back at start: a replay stays refused across restarts).
    public private(set) var lastCounter: UInt32?
    /// When the last good advertisement came; nil: none yet (not online).
    public private(set) var lastGood: BridgeInstant?
    public private(set) var online = false
    var lastPublish: BridgeInstant?

    public init(minInterval: Duration, silence: Duration, state: JSONObject = [:], lastCounter: UInt32? = nil) {
        self.minInterval = minInterval
        self.silence = silence
        self.state = state
        self.lastCounter = lastCounter
    }

    /// A good reading at `now`. The caller marks the device online when ``online`` turns true.
    public mutating func accept(_ reading: PassiveReading, at now: BridgeInstant) -> Outcome {
        if let counter = reading.counter, let last = lastCounter {
            // The same counter again is the sensor repeating its advertisement (each is sent
            // several times): not an error, but no proof of life either (anyone in range can
            // send a recorded one again), so it does not keep the device online. An older
            // counter is a replay.
            if counter == last { return .repeated }
            if counter < last { return .replayed(counter: counter) }
        }
        if let id = reading.packetID, id == lastPacketID {
            lastGood = now
            online = true
            return .repeated
        }
        if let counter = reading.counter { lastCounter = counter }
        lastPacketID = reading.packetID
        lastGood = now
        online = true
        var merged = state
        merged.merge(reading.values)
        guard merged != state else {
            pending = nil
            return .unchanged
        }
        if let last = lastPublish, now - last < minInterval {
            pending = merged
            return .held
        }
        return publish(merged, at: now)
    }

    /// What is due at `now`: a held state whose interval has passed, or offline after the silence.
    public mutating func tick(at now: BridgeInstant) -> [Due] {
        var due: [Due] = []
        if let p = pending, let last = lastPublish, now - last >= minInterval, case let .publish(s) = publish(p, at: now) {
            due.append(.publish(s))
        }
        if online, let good = lastGood, now - good >= silence {
            online = false
            due.append(.offline)
        }
        return due
    }

    /// This node stopped running the device (several bridges): the next good advertisement it
    /// takes makes it `online` again (published by the node that runs it then).
    public mutating func lostSight() {
        online = false
        pending = nil
    }

    /// When ``tick(at:)`` has something to do next (nil: nothing until another reading).
    public var nextDue: BridgeInstant? {
        let held = pending != nil ? lastPublish.map { $0 + minInterval } : nil
        let quiet = online ? lastGood.map { $0 + silence } : nil
        return earliest(held, quiet)
    }

    private mutating func publish(_ s: JSONObject, at now: BridgeInstant) -> Outcome {
        state = s
        pending = nil
        lastPublish = now
        return .publish(s)
    }
}
