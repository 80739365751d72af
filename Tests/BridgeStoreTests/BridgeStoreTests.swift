import BinaryCoding
import Foundation
import GRDB
import Testing
@testable import BridgeStore

/// Tests on a real SQLite file in a fresh temporary directory.
@Suite final class BridgeStoreTests {
    let dir: URL
    var path: String { dir.appendingPathComponent("state.sqlite").path }

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("gatt2mqtt-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: dir) }

    @Test func fileIsPrivateAndInWALMode() throws {
        let store = try BridgeStore(path: path)
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
        let journal = try store.writer.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(journal == "wal")
    }

    @Test func fileIsPrivateWALWithNormalSync() throws {
        let store = try BridgeStore(path: path)
        // synchronous = NORMAL (1): commits survive a crash of the bridge without an fsync each.
        #expect(try store.writer.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") } == 1)
    }

    /// Databases written before v2 hold dates as text; v2 turns them into seconds since 1970, so
    /// deadlines and history ages still compare correctly.
    @Test func migrationV2ConvertsTextDates() throws {
        do {
            let store = try BridgeStore(path: path)
            _ = try store.enqueue(OutboxEntry(deviceID: "cam", transaction: "old", command: "{}", createdAt: Date(), deadline: Date()))
            try store.writer.write { db in
                try db.execute(sql: "UPDATE outbox SET createdAt = '2026-11-22 04:00:00.000', deadline = '2026-11-22 04:01:00.500'")
                try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v2'")
            }
        }
        let store = try BridgeStore(path: path)
        let entry = try #require(try store.pendingCommands().first)
        let expected = try #require(ISO8601DateFormatter().date(from: "2026-11-22T04:01:00Z"))
        #expect(abs(entry.deadline.timeIntervalSince(expected) - 0.5) < 0.001)
        #expect(try store.takeExpired(now: expected).isEmpty)
        #expect(try store.takeExpired(now: expected.addingTimeInterval(1)).map(\.transaction) == ["old"])
    }

    @Test func everythingSurvivesReopen() throws {
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        do {
            let store = try BridgeStore(path: path)
            try store.upsertDevice(DeviceRecord(id: "camera", address: "C0:FF:EE:00:00:01", profile: "gopro"))
            try store.upsertDevice(DeviceRecord(id: "camera", address: "C0:FF:EE:00:00:01", profile: "gopro", paired: true))
            try store.saveState(["encoding": true, "internal_battery_percentage": 84], for: "camera", at: t0)
            let (e, _) = try store.enqueue(OutboxEntry(deviceID: "camera", transaction: "t1", command: #"{"command":"set_shutter","value":true}"#,
                                                   createdAt: t0, deadline: t0.addingTimeInterval(60),
                                                   responseTopic: "reply/here", correlationData: Data([1, 2, 3])))
            #expect(e.id != nil)
            try store.setStatus(.sent, for: e.id!)
        }
        let store = try BridgeStore(path: path)
        #expect(try store.devices() == [DeviceRecord(id: "camera", address: "C0:FF:EE:00:00:01", profile: "gopro", paired: true)])
        #expect(try store.states()["camera"] == ["encoding": true, "internal_battery_percentage": 84])
        let pending = try store.pendingCommands()
        #expect(pending.count == 1)
        #expect(pending.first?.status == .sent && pending.first?.transaction == "t1")
        #expect(pending.first?.correlationData == Data([1, 2, 3]) && pending.first?.responseTopic == "reply/here")
        try store.removeCommand(pending[0].id!)
        #expect(try store.pendingCommands().isEmpty)
    }

    /// Devices added over MQTT survive a reopen in the order they were added; a rename moves the
    /// registry row, state, queued commands, history and the runtime configuration together.
    @Test func runtimeDevicesSurviveReopenAndRenameMovesEverything() throws {
        let t0 = Date(timeIntervalSince1970: 1_700_000_000)
        do {
            let store = try BridgeStore(path: path)
            try store.saveRuntimeDevice(id: "thermo", config: #"{"id":"thermo"}"#, at: t0)
            try store.saveRuntimeDevice(id: "band", config: #"{"id":"band"}"#, at: t0.addingTimeInterval(1))
            try store.saveRuntimeDevice(id: "thermo", config: #"{"id":"thermo","name":"T"}"#, at: t0.addingTimeInterval(2))
            try store.upsertDevice(DeviceRecord(id: "thermo", address: "C0:FF:EE:00:00:04", profile: "custom", paired: true))
            try store.saveState(["temperature": 21.5], for: "thermo", at: t0)
            _ = try store.enqueue(OutboxEntry(deviceID: "thermo", transaction: "q", command: "{}", createdAt: t0, deadline: t0.addingTimeInterval(60)))
            try store.appendEvent(EventRecord(deviceID: "thermo", kind: "connected", payload: "{}", at: t0), maxCount: 10, maxAge: .seconds(1e9))
        }
        let store = try BridgeStore(path: path)
        #expect(try store.runtimeDevices().map(\.id) == ["thermo", "band"])
        #expect(try store.runtimeDevices().first?.config == #"{"id":"thermo","name":"T"}"#)
        try store.renameDevice(from: "thermo", to: "porch", config: #"{"id":"porch"}"#)
        #expect(try store.runtimeDevices().map(\.id) == ["porch", "band"])
        #expect(try store.runtimeDevices().first?.config == #"{"id":"porch"}"#)
        #expect(try store.devices().map(\.id) == ["porch"] && store.devices().first?.paired == true)
        #expect(try store.states()["porch"] == ["temperature": 21.5] && store.states()["thermo"] == nil)
        #expect(try store.pendingCommands().map(\.deviceID) == ["porch"])
        #expect(try store.recentEvents(limit: 10).map(\.deviceID) == ["porch"])
        try store.removeRuntimeDevice(id: "porch")
        #expect(try store.runtimeDevices().map(\.id) == ["band"])
        #expect(try store.devices().isEmpty && store.states().isEmpty && store.pendingCommands().isEmpty)
    }

    @Test func latestWinsReplacesQueuedSameAttribute() throws {
        let store = try BridgeStore(path: path)
        let now = Date()
        func entry(_ attr: String, _ v: Int) -> OutboxEntry {
            OutboxEntry(deviceID: "glasses", transaction: nil, command: #"{"command":"set_\#(attr)","value":\#(v)}"#, attribute: attr,
                        createdAt: now, deadline: now.addingTimeInterval(60))
        }
        try store.enqueue(entry("brightness", 1), replacingSameAttribute: true)
        try store.enqueue(entry("volume", 3), replacingSameAttribute: true)
        let (_, replaced) = try store.enqueue(entry("brightness", 9), replacingSameAttribute: true)
        #expect(replaced.map(\.command) == [#"{"command":"set_brightness","value":1}"#])
        #expect(try store.pendingCommands(for: "glasses").map(\.command) == [
            #"{"command":"set_volume","value":3}"#, #"{"command":"set_brightness","value":9}"#,
        ])
    }

    @Test func expiryTakesOnlyQueuedPastDeadline() throws {
        let store = try BridgeStore(path: path)
        let t0 = Date(timeIntervalSince1970: 1_000)
        for (i, offset) in [10.0, 20, 30].enumerated() {
            try store.enqueue(OutboxEntry(deviceID: "d", transaction: "\(i)", command: "{}", createdAt: t0, deadline: t0.addingTimeInterval(offset)))
        }
        let sent = try store.pendingCommands()[0].id!
        try store.setStatus(.sent, for: sent)
        let expired = try store.takeExpired(now: t0.addingTimeInterval(25))
        #expect(expired.map(\.transaction) == ["1"])
        #expect(try store.pendingCommands().map(\.transaction) == ["0", "2"])
    }

    @Test func eventHistoryIsBoundedByCountAndAge() throws {
        let store = try BridgeStore(path: path)
        let t0 = Date(timeIntervalSince1970: 10_000)
        for i in 0..<20 {
            try store.appendEvent(EventRecord(deviceID: "d", kind: "seen", payload: "\(i)", at: t0.addingTimeInterval(Double(i))),
                                  maxCount: 5, maxAge: .seconds(3600))
        }
        #expect(try store.recentEvents(limit: 100).map(\.payload) == ["19", "18", "17", "16", "15"])
        try store.appendEvent(EventRecord(deviceID: nil, kind: "late", payload: "x", at: t0.addingTimeInterval(7200)),
                              maxCount: 5, maxAge: .seconds(3600))
        #expect(try store.recentEvents(limit: 100).map(\.payload) == ["x"])
    }

    /// The connection's settings (docs/configuration.md, "State database"): exclusive locking
    /// (no shared-memory index file), checkpoints every 4000 pages, WAL bounded at 16 MiB.
    @Test func connectionSettings() throws {
        let store = try BridgeStore(path: path)
        let (locking, autocheckpoint, limit) = try store.writer.write { db in
            (try String.fetchOne(db, sql: "PRAGMA locking_mode"), try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint"),
             try Int.fetchOne(db, sql: "PRAGMA journal_size_limit"))
        }
        #expect(locking == "exclusive" && autocheckpoint == 4000 && limit == 16 << 20)
        try store.saveState(["a": 1], for: "d", at: Date())
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        let walMode = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.posixPermissions] as? NSNumber
        #expect(walMode?.intValue == 0o600)
    }

    /// A file from before (SQLite's 4 KiB pages) is rebuilt once with 1 KiB pages, keeping
    /// everything; a new file gets them from the start.
    @Test func olderFileIsRebuiltWithSmallPages() throws {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        do {
            let store = try BridgeStore(path: path)
            #expect(try store.writer.read { db in try Int.fetchOne(db, sql: "PRAGMA page_size") } == 1024)
            try store.upsertDevice(DeviceRecord(id: "cam", address: "C0:FF:EE:00:00:01", profile: "gopro", paired: true))
            try store.saveState(["encoding": true, "video_resolution": "4K"], for: "cam", at: now)
            try store.enqueue(OutboxEntry(deviceID: "cam", transaction: "\"t\"", command: "{}", status: .sent, createdAt: now, deadline: now))
        }
        do {
            let old = try DatabaseQueue(path: path)
            try old.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = DELETE; PRAGMA page_size = 4096; VACUUM; PRAGMA journal_mode = WAL")
                #expect(try Int.fetchOne(db, sql: "PRAGMA page_size") == 4096)
            }
        }
        let store = try BridgeStore(path: path)
        let (pageSize, journal) = try store.writer.read { db in
            (try Int.fetchOne(db, sql: "PRAGMA page_size"), try String.fetchOne(db, sql: "PRAGMA journal_mode"))
        }
        #expect(pageSize == 1024 && journal == "wal")
        #expect(try store.devices() == [DeviceRecord(id: "cam", address: "C0:FF:EE:00:00:01", profile: "gopro", paired: true)])
        #expect(try store.states() == ["cam": ["encoding": true, "video_resolution": "4K"]])
        #expect(try store.pendingCommands().map(\.transaction) == ["\"t\""])
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
    }

    /// The store holds the file: a second bridge on the same database fails at start, saying
    /// why, instead of sharing (and double-running) the outbox; once the first is closed it opens.
    @Test func secondOpenerIsRefusedWhileTheFileIsHeld() throws {
        do {
            let first = try BridgeStore(path: path)
            try first.saveState(["a": 1], for: "d", at: Date())
            #expect {
                _ = try BridgeStore(path: path, busyTimeout: 0.05)
            } throws: { error in
                guard case .cannotOpen(let p, let reason)? = error as? StoreError else { return false }
                return p == path && reason.contains("another process")
            }
        }
        #expect(try BridgeStore(path: path).states()["d"] == ["a": 1])
    }

    /// v3 rebuilds a v2 outbox (AUTOINCREMENT, index on deviceID) without either, keeping its
    /// rows; ids still never repeat while the store is open, and the per-device query works.
    @Test func migrationV3RebuildsTheOutbox() throws {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        do {
            let store = try BridgeStore(path: path)
            try store.writer.write { db in
                try db.execute(sql: """
                    DROP TABLE outbox;
                    CREATE TABLE outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, deviceID TEXT NOT NULL, "transaction" TEXT,
                        command TEXT NOT NULL, attribute TEXT, status TEXT NOT NULL, createdAt DATETIME NOT NULL,
                        deadline DATETIME NOT NULL, responseTopic TEXT, correlationData BLOB);
                    CREATE INDEX outbox_on_deviceID ON outbox(deviceID);
                    INSERT INTO outbox VALUES (7, 'a', '"t7"', '{"to":"a"}', NULL, 'sent', 1700000000, 1700000060, 'reply', x'0102');
                    DELETE FROM grdb_migrations WHERE identifier = 'v3';
                    """)
            }
        }
        let store = try BridgeStore(path: path)
        let (schema, indexes) = try store.writer.read { db in
            (try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'outbox'"),
             try String.fetchAll(db, sql: "SELECT name FROM pragma_index_list('outbox')"))
        }
        #expect(schema?.contains("AUTOINCREMENT") == false && indexes.isEmpty)
        #expect(try store.pendingCommands() == [
            OutboxEntry(id: 7, deviceID: "a", transaction: #""t7""#, command: #"{"to":"a"}"#, status: .sent, createdAt: now,
                        deadline: now.addingTimeInterval(60), responseTopic: "reply", correlationData: Data([1, 2])),
        ])
        var ids: [Int64] = []
        for d in ["b", "a"] {
            let id = try #require(try store.enqueue(OutboxEntry(deviceID: d, transaction: nil, command: #"{"to":"\#(d)"}"#,
                                                                createdAt: now, deadline: now)).entry.id)
            ids.append(id)
            try store.removeCommand(id)  // the newest row goes: its id must still not come back
        }
        let last = try #require(try store.enqueue(OutboxEntry(deviceID: "a", transaction: nil, command: #"{"to":"a"}"#,
                                                              createdAt: now, deadline: now)).entry.id)
        #expect(ids == [8, 9] && last == 10)
        #expect(try store.pendingCommands(for: "a").map(\.id) == [7, 10])
        #expect(try store.pendingCommands(for: "b").isEmpty)
    }

    /// An answer's writes (removal + new state) land together and survive a reopen.
    @Test func applyCommitsAnAnswerTogether() throws {
        let now = Date()
        do {
            let store = try BridgeStore(path: path)
            let id = try #require(try store.enqueue(OutboxEntry(deviceID: "cam", transaction: "\"t\"", command: "{}", status: .sent,
                                                                createdAt: now, deadline: now)).entry.id)
            let other = try #require(try store.enqueue(OutboxEntry(deviceID: "cam2", transaction: nil, command: "{}", status: .sent,
                                                                   createdAt: now, deadline: now)).entry.id)
            try store.apply([])
            try store.apply([.removeCommand(id), .saveState(deviceID: "cam", json: #"{"encoding":true,"battery":84}"#, at: 1_700_000_000)])
            #expect(try store.pendingCommands().map(\.id) == [other])
            // A batch of several devices' answers, applied in order (the later state wins).
            try store.apply([.removeCommand(other), .saveState(deviceID: "cam2", json: #"{"x":1}"#, at: 1),
                             .saveState(deviceID: "cam2", json: #"{"x":2}"#, at: 2)])
        }
        let store = try BridgeStore(path: path)
        #expect(try store.pendingCommands().isEmpty)
        #expect(try store.states() == ["cam": ["encoding": true, "battery": 84], "cam2": ["x": 2]])
        let at = try store.writer.read { db in try Double.fetchOne(db, sql: "SELECT updatedAt FROM deviceState WHERE deviceID = 'cam'") }
        #expect(at == 1_700_000_000)
    }

    /// A passive device's last accepted counter (migration v8): written with its state in one
    /// commit, read back after a reopen under the same key check only, moved by a rename, gone
    /// with the device. A file of before v8 gains the table.
    @Test func passiveCountersSurviveAReopenUnderTheirKey() throws {
        do {
            let store = try BridgeStore(path: path)
            try store.writer.write { db in
                try db.execute(sql: "DROP TABLE passiveCounter; DELETE FROM grdb_migrations WHERE identifier = 'v8'")
            }
        }
        do {
            let store = try BridgeStore(path: path)
            #expect(try store.passiveCounter(for: "porch", keyCheck: 7) == nil)
            try store.apply([.saveCounter(deviceID: "porch", counter: 41, keyCheck: 7),
                             .saveState(deviceID: "porch", json: #"{"temperature":21.5}"#, at: 1)])
            try store.apply([.saveCounter(deviceID: "porch", counter: UInt32.max, keyCheck: 7)])
            try store.apply([.saveCounter(deviceID: "shed", counter: 3, keyCheck: -1)])
        }
        let store = try BridgeStore(path: path)
        #expect(try store.passiveCounter(for: "porch", keyCheck: 7) == UInt32.max)
        #expect(try store.passiveCounter(for: "porch", keyCheck: 8) == nil, "another key's counter is not this key's")
        #expect(try store.states()["porch"] == ["temperature": 21.5])
        try store.renameDevice(from: "shed", to: "barn", config: nil)
        #expect(try store.passiveCounter(for: "barn", keyCheck: -1) == 3 && store.passiveCounter(for: "shed", keyCheck: -1) == nil)
        try store.removeDevice("porch")
        #expect(try store.passiveCounter(for: "porch", keyCheck: 7) == nil)
        try store.removeRuntimeDevice(id: "barn")
        #expect(try store.passiveCounter(for: "barn", keyCheck: -1) == nil)
    }

    /// All or nothing: when one write of the commit fails, the removal before it is rolled back
    /// (the command stays `sent`, so a restart answers it `interrupted`), and the store stays usable.
    @Test func applyIsAllOrNothing() throws {
        let store = try BridgeStore(path: path)
        let now = Date()
        let id = try #require(try store.enqueue(OutboxEntry(deviceID: "cam", transaction: nil, command: "{}", status: .sent,
                                                            createdAt: now, deadline: now)).entry.id)
        try store.writer.write { db in
            try db.execute(sql: """
                CREATE TEMP TRIGGER refuse BEFORE INSERT ON deviceState WHEN NEW.deviceID = 'bad'
                BEGIN SELECT RAISE(ABORT, 'refused by the test'); END
                """)
        }
        #expect {
            try store.apply([.removeCommand(id), .saveState(deviceID: "bad", json: "{}", at: 1)])
        } throws: { error in
            guard case .operationFailed(let reason)? = error as? StoreError else { return false }
            return reason.contains("refused by the test")
        }
        #expect(try store.pendingCommands().map(\.id) == [id])
        #expect(try store.states().isEmpty)
        try store.apply([.removeCommand(id), .saveState(deviceID: "cam", json: #"{"ok":true}"#, at: 1)])
        #expect(try store.pendingCommands().isEmpty && store.states() == ["cam": ["ok": true]])
    }

    @Test func corruptFileIsAClearError() throws {
        try Data(repeating: 0x42, count: 8192).write(to: URL(fileURLWithPath: path))
        #expect {
            _ = try BridgeStore(path: path)
        } throws: { error in
            guard case .corrupt(let p, _)? = error as? StoreError else { return false }
            return p == path && "\(error)".contains("move the file aside")
        }
    }

    @Test func unwritableLocationIsAClearError() throws {
        let file = dir.appendingPathComponent("a-file")
        try Data().write(to: file)
        #expect {
            _ = try BridgeStore(path: file.appendingPathComponent("state.sqlite").path)
        } throws: { error in
            guard case .cannotOpen? = error as? StoreError else { return false }
            return true
        }
    }
}

/// The markers of the messages being handled (crash-loop protection).
@Suite struct InflightStoreTests {
    @Test func markersSurviveAReopenAndAreTakenOnce() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gatt2mqtt-inflight-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("state.sqlite").path
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        let big = [UInt8](repeating: 0x41, count: 5000)
        do {
            let store = try BridgeStore(path: path)
            try store.markInflight(InflightMessage(topic: "g/dev/set", payload: Array(#"{"transaction":1}"#.utf8), packetID: 9,
                                                   responseTopic: "r", correlationData: [7], at: at))
            try store.markInflight(InflightMessage(topic: "g/bridge/request/scan", payload: big, packetID: nil, at: at + 1))
            try store.markInflight(InflightMessage(topic: "g/other/set", payload: [1], packetID: 3, at: at + 2))
            try store.clearInflight(topic: "g/other/set", digest: InflightMessage.digest([1]))
            // The same message marked twice is one marker.
            try store.markInflight(InflightMessage(topic: "g/dev/set", payload: Array(#"{"transaction":1}"#.utf8), packetID: 9,
                                                   responseTopic: "r", correlationData: [7], at: at))
        }
        let store = try BridgeStore(path: path)
        let left = try store.takeInflight()
        #expect(left.map(\.topic) == ["g/dev/set", "g/bridge/request/scan"])
        #expect(left[0] == InflightMessage(topic: "g/dev/set", payload: Array(#"{"transaction":1}"#.utf8), packetID: 9,
                                           responseTopic: "r", correlationData: [7], at: at))
        #expect(left[1].payload.count == InflightMessage.payloadPrefix, "a prefix of the payload is kept")
        #expect(left[1].digest == InflightMessage.digest(big), "the digest covers the whole payload")
        #expect(left[1].packetID == nil && left[1].correlationData == nil)
        #expect(try store.takeInflight().isEmpty, "taken once")
    }

    /// A marker goes to the mapped file beside the database (mode 0600), not into SQLite: it is
    /// in the file's bytes as soon as it is marked, and gone from them when cleared.
    @Test func markersLiveInTheMappedFileBesideTheDatabase() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gatt2mqtt-inflight-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("state.sqlite").path
        let store = try BridgeStore(path: path)
        let topic = "g/camera-\(UUID().uuidString)/set"
        let payload = Array(#"{"command":"set_shutter","value":true}"#.utf8)
        try store.markInflight(InflightMessage(topic: topic, payload: payload, packetID: 1, at: Date()))
        let file = try Data(contentsOf: URL(fileURLWithPath: path + "-inflight"))
        #expect(file.count == InflightMarkers.fileSize)
        #expect(file.range(of: Data(topic.utf8)) != nil, "the marker is in the file before any commit")
        let mode = try FileManager.default.attributesOfItem(atPath: path + "-inflight")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try store.clearInflight(topic: topic, digest: InflightMessage.digest(payload))
        #expect(try store.takeInflight().isEmpty)
    }

    /// More markers than the file's slots, and one too large for a slot, go to the `inflight`
    /// table: all of them survive a reopen, oldest first, and clearing finds each where it is.
    @Test func markersTheFileCannotHoldGoToSQLite() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gatt2mqtt-inflight-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("state.sqlite").path
        let at = Date(timeIntervalSince1970: 1_700_000_000)
        let count = InflightMarkers.slotCount + 3
        let long = "g/" + String(repeating: "t", count: InflightMarkers.slotSize) + "/set"
        do {
            let store = try BridgeStore(path: path)
            for i in 0..<count {
                try store.markInflight(InflightMessage(topic: "g/d\(i)/set", payload: [UInt8(i)], packetID: i, at: at + Double(i)))
            }
            try store.markInflight(InflightMessage(topic: long, payload: [1], packetID: nil, at: at + 100))
            // One cleared from the file, one from the table.
            try store.clearInflight(topic: "g/d0/set", digest: InflightMessage.digest([0]))
            try store.clearInflight(topic: "g/d\(count - 1)/set", digest: InflightMessage.digest([UInt8(count - 1)]))
        }
        let store = try BridgeStore(path: path)
        let left = try store.takeInflight()
        #expect(left.map(\.topic) == (1..<(count - 1)).map { "g/d\($0)/set" } + [long])
        #expect(left.map(\.packetID) == (1..<(count - 1)).map { Optional($0) } + [nil])
        #expect(try store.takeInflight().isEmpty)
    }

    /// A damaged marker file (a slot marked in use whose body does not check out, garbage
    /// elsewhere) gives no marker and does not stop the store; a file of another size or layout
    /// is cleared.
    @Test func aDamagedMarkerFileIsDropped() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("gatt2mqtt-inflight-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("state.sqlite").path
        do {
            let store = try BridgeStore(path: path)
            try store.markInflight(InflightMessage(topic: "g/dev/set", payload: [1, 2, 3], packetID: 5, at: Date()))
        }
        // Flip a byte of the kept marker's body: its checksum no longer matches.
        var bytes = try Data(contentsOf: URL(fileURLWithPath: path + "-inflight"))
        let body = InflightMarkers.headerSize + InflightMarkers.slotHeader
        bytes[body] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: path + "-inflight"))
        do {
            let store = try BridgeStore(path: path)
            #expect(try store.takeInflight().isEmpty)
        }
        // Random bytes of another size: cleared, and the file works again.
        try Data((0..<5000).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: path + "-inflight"))
        let store = try BridgeStore(path: path)
        #expect(try store.takeInflight().isEmpty)
        try store.markInflight(InflightMessage(topic: "g/dev/set", payload: [9], packetID: 1, at: Date()))
        #expect(try store.takeInflight().map(\.topic) == ["g/dev/set"])
    }

    @Test func theDigestTellsPayloadsApart() {
        #expect(InflightMessage.digest([1, 2]) != InflightMessage.digest([2, 1]))
        #expect(InflightMessage.digest([]) != InflightMessage.digest([0]))
        #expect(InflightMessage.digest(Array("x".utf8)) == InflightMessage.digest(Array("x".utf8)))
    }

}

/// The writes every command makes, bound through SQLite's C API (`DirectStatement`), on a real
/// SQLite file in a fresh temporary directory.
@Suite final class DirectStatementTests {
    let dir: URL
    var path: String { dir.appendingPathComponent("state.sqlite").path }

    init() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("gatt2mqtt-direct-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(at: dir) }

    /// The outbox row written through SQLite's C API (`DirectStatement`) reads back through GRDB
    /// exactly as it was given: empty and non-ASCII text, absent and empty values, dates.
    @Test func directlyBoundOutboxRowsReadBackAsGiven() throws {
        let store = try BridgeStore(path: path)
        let t0 = Date(timeIntervalSince1970: 1_700_000_000.25)
        let entries = [
            OutboxEntry(deviceID: "camera", transaction: "", command: #"{"command":"set_shutter","value":true}"#, status: .sent,
                        createdAt: t0, deadline: t0.addingTimeInterval(30), responseTopic: "reply/ü/ß", correlationData: Data([0, 1, 255])),
            OutboxEntry(deviceID: "glasses – 眼鏡", transaction: nil, command: "", attribute: nil, createdAt: t0, deadline: t0,
                        responseTopic: nil, correlationData: Data()),
            OutboxEntry(deviceID: "x", transaction: "t\t1", command: String(repeating: "é", count: 5000), createdAt: t0, deadline: t0),
        ]
        var stored: [OutboxEntry] = []
        for e in entries { stored.append(try store.enqueue(e).entry) }
        #expect(stored.map { $0.id != nil } == [true, true, true])
        let back = try store.pendingCommands()
        #expect(back == stored)
        #expect(back[1].correlationData == Data())
        #expect(back[1].transaction == nil)
        try store.setStatus(.sent, for: try #require(stored[2].id))
        #expect(try store.pendingCommands().map(\.status) == [OutboxEntry.Status.sent, .queued, .sent])
        try store.apply([.removeCommand(try #require(stored[0].id)), .saveState(deviceID: "camera", json: #"{"a":1}"#, at: 5)])
        #expect(try store.pendingCommands().map(\.deviceID) == ["glasses – 眼鏡", "x"])
        #expect(try store.states()["camera"] == ["a": 1])
    }

    /// A directly bound statement that fails says why (SQLite's message), leaves nothing written,
    /// and the same cached statement works at the next call; binding the wrong number of values
    /// is refused before the step.
    @Test func directStatementErrorsAreReportedAndTheStatementIsReusable() throws {
        let store = try BridgeStore(path: path)
        try store.writer.write { db in try db.execute(sql: "CREATE TABLE t (k TEXT NOT NULL UNIQUE, v INTEGER)") }
        let insert = "INSERT INTO t (k, v) VALUES (?, ?)"
        try store.writer.writeWithoutTransaction { db in try DirectStatement.run(insert, in: db) { $0.bind("a"); $0.bind(Int64(1)) } }
        #expect {
            try store.writer.writeWithoutTransaction { db in try DirectStatement.run(insert, in: db) { $0.bind("a"); $0.bind(Int64(2)) } }
        } throws: { error in
            let e = error as? DatabaseError
            return e?.resultCode == .SQLITE_CONSTRAINT && (e?.message ?? "").contains("UNIQUE")
        }
        #expect {
            try store.writer.writeWithoutTransaction { db in try DirectStatement.run(insert, in: db) { $0.bind(nil as String?); $0.bind(Int64(3)) } }
        } throws: { error in (error as? DatabaseError)?.resultCode == .SQLITE_CONSTRAINT }
        #expect {
            try store.writer.writeWithoutTransaction { db in try DirectStatement.run(insert, in: db) { $0.bind("c") } }
        } throws: { error in
            let e = error as? DatabaseError
            return e?.resultCode == .SQLITE_RANGE && (e?.message ?? "").contains("1 values bound, the statement has 2")
        }
        try store.writer.writeWithoutTransaction { db in try DirectStatement.run(insert, in: db) { $0.bind("b"); $0.bind(Int64(4)) } }
        let rows = try store.writer.read { db in try Row.fetchAll(db, sql: "SELECT k, v FROM t ORDER BY k") }
        #expect(rows.map { $0["k"] as String } == ["a", "b"])
        #expect(rows.map { $0["v"] as Int64 } == [1, 4])
    }
}
