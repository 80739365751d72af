import BinaryCoding
import Foundation

/// The link's side of a session: what a link up, a loss, a handover and a stop do once
/// ``LinkStateMachine`` said so; the timer's checks at the session's deadline; sightings.
extension DeviceSession {
    /// The link `l` was taken (``LinkStateMachine/linkUp(_:)``).
    func linkUp(_ l: any BLELink) {
        linkDriver.signal.set(up: true)
        metrics.linkUp(pairing: l.pairDuration)
        if l.pairedOnConnect {
            // A first pairing: the registry remembers it, the driver finishes it (GoPro §2).
            driver.didPair()
            try? output.store.markPaired(id)
            output.event("device_paired", device: id)
        }
        do throws(CommandError) {
            queue.startUp(try driver.startupRequests())
        } catch {
            output.logger.error("profile start-up failed", metadata: ["device": "\(id)", "error": "\(error)"])
        }
        schedule.up(at: output.clock.now(), keepAlive: driver.keepAlive?.interval, polls: driver.polls.count)
        publishAvailability(true)
        let now = Date()
        try? output.store.markSeen(id, at: now)
        commitState([:], at: now)  // last_seen
        output.event("device_connected", device: id)
    }

    /// The link is gone (``LinkStateMachine/linkLost()`` or ``LinkStateMachine/lost()``).
    func linkDown(_ reason: String) {
        linkDriver.signal.set(up: false)
        metrics.linkDown()
        driver.linkLost()
        schedule.down()
        // The writer task's pending call fails on the dead link; its result is ignored.
        if let f = queue.linkLost() {
            finish(f.command, .error, error: CommandError(.interrupted, "the link to \(id) was lost after the command was written (not repeated)"))
        }
        publishAvailability(false)
        output.event("device_disconnected", device: id, ["reason": .string(reason)])
    }

    /// Takes the device (the link comes up by ``LinkDriver/maintainLink()``) or gives it up: the
    /// waiting commands end with `error`, a command under way ends `interrupted` (never
    /// repeated), the link closes and the availability goes offline before this returns, so the
    /// next owner's `online` comes after it.
    func ownership(_ on: Bool, failingQueuedWith error: CommandError?) async {
        passive?.tracker.lostSight()  // a passive device is online again at its first advertisement here
        guard !on else { return link.gained() }
        linkDriver.signal.set(owned: false)
        let l = link.lost()
        if let error {
            stopQueued(error)
        } else {
            dropQueued()
        }
        if let l {
            linkDown("handed over")
            await linkDriver.signal.working { await l.disconnect() }
        }
    }

    /// The session stops: the link closes, its waiters are answered `stopped`.
    func shutdown() async {
        let (l, waiters) = link.stop()
        if let l { await l.disconnect() }
        metrics.linkDown()
        for w in waiters { w.resume(returning: .stopped) }
    }

    /// When ``checkTimers()`` (or, for a passive device, ``passiveTimers()``) has something to
    /// do next: the earliest of the link's waiters, the waiting commands' deadlines, the answer
    /// timeout, the availability silence, the polls and the keep-alive (nil: nothing until
    /// another event). Each is the first instant at which its check fires.
    var nextDeadline: BridgeInstant? {
        if isPassive { return link.isOwned ? passive?.tracker.nextDue : nil }
        // Asked after every event: the parts are read where they are stored, and a part's getter
        // is called only when it has something to say (a getter of `queue`, `link` or `schedule`
        // may copy that struct out of the session first, the command under way with it; most of
        // the ~5k instructions this once cost a call were `ContinuousClock.Instant`'s, see
        // ``BridgeInstant``).
        var next = queue.inFlight?.timeoutAt
        if !queue.waiting.isEmpty { next = earliest(next, queue.waitingDeadline) }
        if !link.waiters.isEmpty { next = earliest(next, link.nextDeadline) }
        if !schedule.nextPolls.isEmpty || schedule.nextKeepAlive != nil { next = earliest(next, schedule.nextDue) }
        return link.available ? earliest(next, schedule.silence(timeout: config.availabilityTimeout)) : next
    }

    /// Posts the session's next deadline to the bridge's timer when it changed (after each event).
    func postDeadline() {
        let next = nextDeadline
        if case let .some(posted) = postedDeadline, posted == next { return }
        postedDeadline = .some(next)
        output.wake.set(ObjectIdentifier(self), next)
    }

    /// The bridge's timer, at ``nextDeadline``: the link's waiters, deadlines, answer timeouts,
    /// availability, polls and the keep-alive at the clock's now.
    func checkTimers() {
        let now = output.clock.now()
        for (w, answer) in link.expire(at: now) { w.resume(returning: answer) }
        let (expired, timedOut) = queue.expire(at: now)
        for cmd in expired {
            finish(cmd, .expired, error: CommandError(.deviceOffline, "\(id) did not become ready before the deadline"))
        }
        if let f = timedOut {
            let error = CommandError(.timeout, "no answer from \(id) within \(f.limit)")
            finish(f.command, .error, error: error)
            internalFailed(f.command, error)
        }
        // Availability from the last good exchange.
        if link.available, schedule.silent(at: now, timeout: config.availabilityTimeout), link.silent() { publishAvailability(false) }
        // Polls and keep-alive (none due while the link is down).
        schedule.duePolls(at: now, driver.polls) { queue.appendInternal($0) }
        if let k = driver.keepAlive, schedule.keepAliveDue(at: now, interval: k.interval) { queue.pushInternal(k.request) }
    }

    /// A sighting's RSSI (the ``observed(rssi:)`` event): put in the state when it moved by ``BridgeDefaults/rssiStep``.
    func updateRSSI(_ rssi: Int) {
        lastRSSI = rssi
        guard state.rssiIsNews(rssi) else { return }
        commitState(["rssi": .int(Int64(rssi))], at: Date())
    }

    /// Merges `changed` and `last_seen` into the state, stores it and publishes it (staged
    /// like an answer's state: a device's states are saved in the order they were made).
    func commitState(_ changed: JSONObject, at date: Date) {
        let json = state.stamp(changed, at: date)
        output.batch.stage([.saveState(deviceID: id, json: json, at: date.timeIntervalSince1970)], timed: false)
        publishState(json: json)
    }
}
