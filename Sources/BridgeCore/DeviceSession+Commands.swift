import BinaryCoding
import BridgeStore
import Foundation

/// The commands' side of a session: admission (``CommandQueue/admission(of:linkUp:busy:policy:device:limit:)``
/// decides), the outbox rows, the dispatch (one GATT operation in flight), the writer's results
/// and the driver's outputs (``OutputEffects`` decides), each carried out.
extension DeviceSession {
    func accept(_ cmd: PendingCommand) {
        var cmd = cmd
        // Validate now, so a bad command is answered at once even while the device is away. One
        // that goes out at once is encoded here by the driver itself, for this link, once; any
        // other is validated on a copy of the driver (encoding assigns sequence numbers and
        // registers the expected answer, so it happens for real when the command is sent).
        if case let .command(body) = cmd.payload {
            do throws(CommandError) {
                let request: DeviceRequest
                if let l = link.link, queue.isIdle, !driverIsBusy {
                    request = try driver.encode(body, mtu: l.mtu)
                    cmd.encoded = request
                } else {
                    var probe = driver
                    request = try probe.encode(body, mtu: link.link?.mtu ?? BridgeDefaults.attMTU)
                }
                cmd.attribute = request.attribute
                cmd.bypassesBusyGate = request.bypassesBusyGate
            } catch {
                finish(cmd, .error, error: error)
                return
            }
        }
        switch queue.admission(of: cmd, linkUp: link.isUp, busy: driverIsBusy, policy: config.offlinePolicy, device: id,
                               limit: output.maxQueued) {
        case let .reject(error):
            finish(cmd, .error, error: error)
        case let .accept(outbox, announce):
            switch outbox {
            case .atDispatch, .unchanged: break
            case .queuedNow: store(&cmd)
            case .queuedAtEndOfTurn: output.batch.atEndOfTurn { [sink] in sink.yield(.deferredRowsDue, inline: true) }
            }
            if announce {
                cmd.announced = true
                output.respond(cmd, device: id, .queued)
            }
            queue.append(cmd)
        }
    }

    /// Stores the waiting commands whose `queued` row ``accept(_:)`` put off and that were not
    /// sent meanwhile.
    func storeDeferredRows() {
        // Never put off under `latest` (its store looks for older rows of the attribute and
        // changes the queue), so nothing is to store then.
        guard config.offlinePolicy != .latest else { return }
        queue.storeUnstored { store(&$0) }
    }

    /// Stores a command that waits (`queued`); under the `latest` policy the waiting commands
    /// for the same attribute end `superseded`.
    func store(_ cmd: inout PendingCommand) {
        let entry = cmd.outboxEntry(device: id, .queued, now: output.clock.now(), wallNow: Date())
        do throws(StoreError) {
            let latest = config.offlinePolicy == .latest && cmd.attribute != nil
            let (saved, replaced) = try output.metrics.commit { () throws(StoreError) in try output.store.enqueue(entry, replacingSameAttribute: latest) }
            cmd.outboxID = saved.id
            if !replaced.isEmpty {
                for old in queue.remove(outboxIDs: Set(replaced.compactMap(\.id))) {
                    output.respond(old, device: id, .error, error: CommandError(.superseded, "replaced by a newer \(cmd.attribute ?? "") command"))
                }
            }
        } catch {
            output.logger.error("outbox write failed", metadata: ["device": "\(id)", "error": "\(error)"])
        }
    }

    /// The queued commands when the session stops: ended with `error`, or left in the outbox.
    func stopQueued(_ error: CommandError?) {
        let (interrupted, waiting) = queue.stop()
        if let f = interrupted {
            finish(f.command, .error, error: CommandError(.interrupted, "\(id) was stopped after the command was written (not repeated)"))
        }
        if let error { for cmd in waiting where !cmd.isInternal { finish(cmd, .error, error: error) } }
    }

    /// The queued commands when another node that held them takes the device (a competing claim
    /// of the same epoch won): the waiting ones leave the outbox unanswered, that node answers
    /// them. One already written may be written again there, so it ends `interrupted` here.
    func dropQueued() {
        let (interrupted, waiting) = queue.stop()
        if let f = interrupted {
            finish(f.command, .error, error: CommandError(.interrupted, "\(id) was taken by another bridge after the command was written"))
        }
        for cmd in waiting { if let oid = cmd.outboxID { try? output.metrics.commit { try output.store.removeCommand(oid) } } }
    }

    // MARK: Dispatch (one GATT operation in flight)

    func dispatch() {
        while let l = link.link {
            var cmd: PendingCommand
            switch queue.next(busy: driverIsBusy) {
            case .underWay: return
            case .blocked:
                queue.announceWaiting { output.respond($0, device: id, .queued) }
                return
            case let .send(c): cmd = c
            }
            let request: DeviceRequest
            do throws(CommandError) {
                switch cmd.payload {
                case let .internal(r): request = r
                case let .command(body):
                    if let encoded = cmd.encoded { request = encoded } else { request = try driver.encode(body, mtu: l.mtu) }
                case let .write(topic, payload): request = try driver.encodeWrite(topic: topic, payload: payload, mtu: l.mtu)
                }
            } catch {
                finish(cmd, .error, error: error)
                continue
            }
            // At most once: the outbox says `sent` before the device gets the first byte.
            let now = output.clock.now()
            if let oid = cmd.outboxID {
                try? output.metrics.commit { try output.store.setStatus(.sent, for: oid) }
            } else if !cmd.isInternal {
                let entry = cmd.outboxEntry(device: id, .sent, now: now, wallNow: Date())
                do throws(StoreError) {
                    cmd.outboxID = try output.metrics.commit { () throws(StoreError) in try output.store.enqueue(entry) }.entry.id
                } catch {
                    output.logger.error("outbox write failed", metadata: ["device": "\(id)", "error": "\(error)"])
                }
            }
            if cmd.announced { output.respond(cmd, device: id, topic: responseTopic, .sent) }
            cmd.encoded = nil
            switch queue.start(cmd, request, commandTimeout: config.commandTimeout, now: now) {
            case .done: finish(cmd, .ok)
            case .awaiting: break
            case let .write(sequence):
                // Writes only: started here, their outcome an event straight from where it comes
                // (the writer task stays for a link that cannot, and for reads).
                let events = sink
                let started = request.read == nil && l.startWrites(request.writes) { result in
                    events.yield(.written(sequence: sequence, result.map { nil }), inline: true)
                }
                if !started { linkDriver.write(.init(sequence: sequence, link: l, request: request)) }
            }
        }
    }

    /// The writer task finished operation `sequence`.
    func written(_ sequence: UInt64, _ result: Result<[UInt8]?, BLEError>) {
        var failure: BLEError?
        var value: [UInt8]?
        switch result {
        case let .success(v): value = v
        case let .failure(e): failure = e
        }
        let outcome = queue.written(sequence, failure: failure)
        switch outcome {
        case .read, .done, .awaitingAnswer: schedule.heard(at: output.clock.now())
        default: break
        }
        switch outcome {
        case .stale, .awaitingAnswer:
            break  // from a link that is gone; or the answer is awaited from a notification
        case .alreadyEnded:
            // Already answered by a notification (or timed out): nothing left but the write's fate.
            if let failure { output.logger.debug("write failed after its answer", metadata: ["device": "\(id)", "error": "\(failure)"]) }
        case let .read(f):
            let effects = process(driver.decodeRead(f.read!, value ?? []), from: nil, answering: f.command)
            finish(f.command, .ok, data: effects.readData, removed: true)
        case let .done(cmd):
            finish(cmd, .ok)
        case let .requeued(cmd):
            // Not written: kept (at the front) for when the link is back.
            if let oid = cmd.outboxID { try? output.store.setStatus(.queued, for: oid) }
        case let .failed(cmd):
            let error = failure!
            let failure = CommandError(.bluetoothError, error.description)
            finish(cmd, .error, error: failure)
            if error.kind != .notConnected { internalFailed(cmd, failure) }  // else linkDown follows
        }
    }

    /// Tells the driver that its internal request `cmd` failed (user commands get a response instead).
    func internalFailed(_ cmd: PendingCommand, _ error: CommandError) {
        guard case let .internal(request) = cmd.payload else { return }
        let outputs = driver.internalRequestFailed(request, error)
        if !outputs.isEmpty { process(outputs, from: nil) }
    }

    /// Carries out what the driver's `outputs` come to (``OutputEffects``): the store writes
    /// staged first, then the answers and publishes in order, then the state.
    /// - Parameter answering: a command these outputs answer (a read's), whose outbox entry is
    ///   removed in the same commit as the new state.
    @discardableResult
    func process(_ outputs: [DriverOutput], from notification: GATTNotification?, answering: PendingCommand? = nil) -> OutputEffects {
        if notification != nil {
            output.counters.notification(metrics)
            schedule.heard(at: output.clock.now())
            if link.heard() { publishAvailability(true) }
        }
        let effects = OutputEffects(outputs, answering: answering, device: id, queue: &queue, state: &state, at: Date())
        // Staged: committed with the turn's other answers, before any publish made from here on.
        output.batch.stage(effects.writes)
        for step in effects.steps {
            switch step {
            case let .answer(cmd, .success(data)): finish(cmd, .ok, data: data, removed: true)
            case let .answer(cmd, .failure(error)): finish(cmd, .error, error: error, removed: true)
            case let .unmatched(key): output.logger.debug("unmatched response", metadata: ["device": "\(id)", "key": "\(key)"])
            case let .event(e): output.mqtt.send(OutboundMessage(topic: output.topics.event(id), json: e, qos: 0, retain: false))
            case let .characteristic(topic, value):
                // Retained like the state: Home Assistant's json_attributes_topic reads it after a restart.
                output.mqtt.send(OutboundMessage(topic: output.topics.characteristic(id, topic), json: value, qos: output.stateQoS,
                                                 retain: output.retainState))
            case let .malformed(reason):
                metrics.decodeErrors.increment()
                output.event("device_error", device: id, ["message": .string(reason)])
            case let .deviceError(error):
                output.event("device_error", device: id, ["code": .string(error.code.rawValue), "message": .string(error.message)])
            }
        }
        if let merged = effects.state {
            publishState(json: merged.json)
            if merged.hardwareChanged { output.deviceInfoChanged(config, state.values) }
        }
        return effects
    }

    /// - Parameter removed: the outbox entry was already removed (with the answer's state).
    func finish(_ cmd: PendingCommand, _ status: CommandStatus, data: JSONValue? = nil, error: CommandError? = nil, removed: Bool = false) {
        if !removed, let oid = cmd.outboxID { try? output.metrics.commit { try output.store.removeCommand(oid) } }
        output.respond(cmd, device: id, topic: responseTopic, status, data: data, error: error)
    }
}
