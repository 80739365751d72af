import BinaryCoding
import Foundation
import GRDB
import Synchronization

/// What can go wrong with the state database. Every case names the file and says what to do.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file (or its directory) cannot be created, opened or written.
    case cannotOpen(path: String, reason: String)
    /// The file is not a usable SQLite database (corrupt, or not a database at all).
    case corrupt(path: String, reason: String)
    /// A read or write failed while running.
    case operationFailed(reason: String)

    public var description: String {
        switch self {
        case let .cannotOpen(path, reason):
            return "cannot open the state database \(path): \(reason) (check the directory exists and is writable, or set database.path)"
        case let .corrupt(path, reason):
            return "the state database \(path) is damaged: \(reason). Recovery: stop the bridge, move the file aside (mv \(path) \(path).broken), start again; device state and pending commands start empty"
        case let .operationFailed(reason):
            return "state database operation failed: \(reason)"
        }
    }
}

/// A known device (the registry).
public struct DeviceRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "device"
    /// Dates are stored as seconds since 1970 (REAL), see migration v2.
    public static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy { .timeIntervalSince1970 }
    public static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy { .timeIntervalSince1970 }
    public var id: String
    public var address: String?
    public var profile: String
    public var name: String?
    public var paired: Bool
    public var lastSeen: Date?

    public init(id: String, address: String?, profile: String, name: String? = nil, paired: Bool = false, lastSeen: Date? = nil) {
        self.id = id
        self.address = address
        self.profile = profile
        self.name = name
        self.paired = paired
        self.lastSeen = lastSeen
    }
}

/// A command waiting for (or being written to) a device.
public struct OutboxEntry: Codable, Sendable, Equatable, FetchableRecord, MutablePersistableRecord {
    public static let databaseTableName = "outbox"
    /// Dates are stored as seconds since 1970 (REAL), see migration v2.
    public static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy { .timeIntervalSince1970 }
    public static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy { .timeIntervalSince1970 }
    public enum Status: String, Codable, Sendable { case queued, sent }

    public var id: Int64?
    public var deviceID: String
    /// The caller's `transaction`, echoed in responses.
    public var transaction: String?
    /// The command JSON as received.
    public var command: String
    /// For latest-wins: the attribute this command sets.
    public var attribute: String?
    public var status: Status
    public var createdAt: Date
    public var deadline: Date
    /// MQTT 5 response topic and correlation data to answer on.
    public var responseTopic: String?
    public var correlationData: Data?

    public init(id: Int64? = nil, deviceID: String, transaction: String?, command: String, attribute: String? = nil,
                status: Status = .queued, createdAt: Date, deadline: Date, responseTopic: String? = nil,
                correlationData: Data? = nil) {
        self.id = id
        self.deviceID = deviceID
        self.transaction = transaction
        self.command = command
        self.attribute = attribute
        self.status = status
        self.createdAt = createdAt
        self.deadline = deadline
        self.responseTopic = responseTopic
        self.correlationData = correlationData
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// One entry of the bounded event history.
public struct EventRecord: Codable, Sendable, Equatable, FetchableRecord, MutablePersistableRecord {
    public static let databaseTableName = "event"
    /// Dates are stored as seconds since 1970 (REAL), see migration v2.
    public static func databaseDateEncodingStrategy(for column: String) -> DatabaseDateEncodingStrategy { .timeIntervalSince1970 }
    public static func databaseDateDecodingStrategy(for column: String) -> DatabaseDateDecodingStrategy { .timeIntervalSince1970 }
    public var id: Int64?
    public var deviceID: String?
    public var kind: String
    public var payload: String
    public var at: Date

    public init(id: Int64? = nil, deviceID: String?, kind: String, payload: String, at: Date) {
        self.id = id
        self.deviceID = deviceID
        self.kind = kind
        self.payload = payload
        self.at = at
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) { id = inserted.rowID }
}

/// Hands out outbox ids: one more than the largest in the table at open, then counting up, so an
/// id is never reused while the store is open (what AUTOINCREMENT guaranteed before v3): a
/// finished command's id held anywhere cannot name a newer command.
final class OutboxIDs: Sendable {
    private let next: Mutex<Int64>
    init(after largest: Int64) { next = Mutex(largest + 1) }
    func take() -> Int64 { next.withLock { n in defer { n += 1 }; return n } }
}

/// The bridge's durable state in SQLite (WAL, file mode 0600): device registry, last known state
/// per device, the command outbox and a bounded event history. Written through as things change,
/// on one connection that holds the file exclusively while the store is open.
public struct BridgeStore: Sendable {
    let writer: any DatabaseWriter
    /// Outbox ids, handed out by the store (see migration v3).
    let outboxIDs: OutboxIDs
    /// The crash markers' file beside the database (nil in memory, or when it cannot be mapped:
    /// then they go to the `inflight` table).
    let markers: InflightMarkers?

    /// Opens (creating if needed) the database file, checks it and migrates it. The store holds
    /// the file until it is released: a second opener waits up to `busyTimeout` seconds, then
    /// fails with ``StoreError/cannotOpen(path:reason:)``. `markersInFile: false` keeps the crash
    /// markers in the `inflight` table only (the store benchmark's comparison).
    public init(path: String, busyTimeout: Double = 5, markersInFile: Bool = true) throws(StoreError) {
        let fm = FileManager.default
        let dir = (path as NSString).deletingLastPathComponent
        if !dir.isEmpty, !fm.fileExists(atPath: dir) {
            do { try fm.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700]) }
            catch { throw .cannotOpen(path: path, reason: "cannot create directory \(dir)") }
        }
        if !fm.fileExists(atPath: path) {
            guard fm.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw .cannotOpen(path: path, reason: "cannot create the file")
            }
        } else {
            guard fm.isWritableFile(atPath: path) else { throw .cannotOpen(path: path, reason: "the file is not writable") }
            try? fm.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        }
        var config = Configuration()
        config.busyMode = .timeout(busyTimeout)
        config.journalMode = .wal
        config.prepareDatabase { db in
            // One connection that holds the file for as long as the bridge runs (set before WAL
            // is entered, so SQLite keeps the WAL index in memory: no `-shm` file, no file-lock
            // syscalls per transaction — about five per commit before). A second bridge on the same
            // file fails at start instead of sharing the outbox (docs/configuration.md,
            // "State database").
            try db.execute(sql: "PRAGMA locking_mode = EXCLUSIVE")
            // 1 KiB pages for a new file (an older file is rebuilt once, below): every commit writes
            // each page it changed to the WAL, and a command's rows are small (an outbox entry; a
            // state of tens of keys, ~1 KB of JSON). Fewer bytes per commit: ~5 µs less CPU per
            // command, and a quarter of the WAL traffic and of the checkpoint's fsync work.
            try db.execute(sql: "PRAGMA page_size = \(Self.pageSize)")
            // WAL with synchronous=NORMAL: a commit survives a crash or `kill -9` of the bridge (the
            // WAL is in the OS), only a power loss or kernel crash may roll back the last commits.
            // FULL would fsync on every commit — two per command — for no gain against the
            // failures a bridge meets (docs/configuration.md, "Durability").
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // A checkpoint (three fsyncs, blocking the writer) every 4000 WAL pages (~4 MiB) instead
            // of 1000: a command writes three pages, so one every ~1300 commands, not ~330.
            // The WAL file is reused, not regrown, after each checkpoint; the size limit bounds
            // it after an unusually large transaction.
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 4000")
            try db.execute(sql: "PRAGMA journal_size_limit = \(16 << 20)")
        }
        do {
            let queue = try DatabaseQueue(path: path, configuration: config)
            let check = try queue.read { db in try String.fetchAll(db, sql: "PRAGMA quick_check") }
            guard check == ["ok"] else { throw StoreError.corrupt(path: path, reason: check.prefix(3).joined(separator: "; ")) }
            // Take the exclusive lock now (it is kept until the store is closed), so a second
            // process fails here, at start.
            try queue.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE; COMMIT") }
            try Self.usePageSize(queue)
            writer = queue
        } catch let e as StoreError {
            throw e
        } catch let e as DatabaseError where [.SQLITE_NOTADB, .SQLITE_CORRUPT].contains(e.resultCode) {
            throw .corrupt(path: path, reason: e.message ?? "\(e.resultCode)")
        } catch let e as DatabaseError where e.resultCode == .SQLITE_BUSY {
            throw .cannotOpen(path: path, reason: "it is in use by another process (another gatt2mqtt with the same database.path?)")
        } catch let e as DatabaseError {
            throw .cannotOpen(path: path, reason: e.message ?? "\(e.resultCode)")
        } catch {
            throw .cannotOpen(path: path, reason: "\(error)")
        }
        try Self.migrate(writer)
        outboxIDs = try Self.outboxIDs(writer)
        markers = markersInFile ? InflightMarkers(path: path + "-inflight") : nil
    }

    /// An in-memory store, for tests of the core.
    public static func inMemory() throws(StoreError) -> BridgeStore {
        do { return try BridgeStore(writer: DatabaseQueue()) } catch { throw .operationFailed(reason: "\(error)") }
    }

    init(writer: any DatabaseWriter) throws(StoreError) {
        self.writer = writer
        try Self.migrate(writer)
        outboxIDs = try Self.outboxIDs(writer)
        markers = nil
    }

    /// The page size of the file (see `init(path:)`).
    static let pageSize = 1024

    /// Rebuilds a file written with another page size (SQLite's default is 4096) once: the page
    /// size can change only by `VACUUM`, and only outside WAL mode. A crash meanwhile leaves the
    /// old file (the rollback journal undoes a partial `VACUUM`).
    private static func usePageSize(_ queue: DatabaseQueue) throws {
        try queue.writeWithoutTransaction { db in
            guard try Int.fetchOne(db, sql: "PRAGMA page_size") != pageSize else { return }
            try db.execute(sql: "PRAGMA journal_mode = DELETE")
            try db.execute(sql: "PRAGMA page_size = \(pageSize)")
            try db.execute(sql: "VACUUM")
            try db.execute(sql: "PRAGMA journal_mode = WAL")
        }
    }

    private static func outboxIDs(_ writer: any DatabaseWriter) throws(StoreError) -> OutboxIDs {
        do { return OutboxIDs(after: try writer.read { db in try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM outbox") } ?? 0) }
        catch { throw .operationFailed(reason: "\(error)") }
    }

    private static func migrate(_ writer: any DatabaseWriter) throws(StoreError) {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "device") { t in
                t.primaryKey("id", .text)
                t.column("address", .text)
                t.column("profile", .text).notNull()
                t.column("name", .text)
                t.column("paired", .boolean).notNull().defaults(to: false)
                t.column("lastSeen", .datetime)
            }
            try db.create(table: "deviceState") { t in
                t.primaryKey("deviceID", .text)
                t.column("state", .text).notNull()
                t.column("updatedAt", .datetime).notNull()
            }
            try db.create(table: "outbox") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("deviceID", .text).notNull().indexed()
                t.column("transaction", .text)
                t.column("command", .text).notNull()
                t.column("attribute", .text)
                t.column("status", .text).notNull()
                t.column("createdAt", .datetime).notNull()
                t.column("deadline", .datetime).notNull()
                t.column("responseTopic", .text)
                t.column("correlationData", .blob)
            }
            try db.create(table: "event") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("deviceID", .text)
                t.column("kind", .text).notNull()
                t.column("payload", .text).notNull()
                t.column("at", .datetime).notNull().indexed()
            }
        }
        // v2: dates as seconds since 1970 (REAL) instead of text — formatting a date as text
        // through DateFormatter was a large share of the bridge's CPU per command.
        migrator.registerMigration("v2") { db in
            for (table, column) in [("device", "lastSeen"), ("deviceState", "updatedAt"), ("outbox", "createdAt"),
                                    ("outbox", "deadline"), ("event", "at")] {
                try db.execute(sql: """
                    UPDATE "\(table)" SET "\(column)" = (julianday("\(column)") - 2440587.5) * 86400.0
                    WHERE typeof("\(column)") = 'text'
                    """)
            }
        }
        // v3: the outbox without AUTOINCREMENT and without its index on deviceID. Each cost a page
        // write per command (the `sqlite_sequence` row on every insert; the index on every insert
        // and delete). The outbox holds only the commands in progress (a few rows), so a scan by
        // device is free; ids still never repeat while the store is open (`OutboxIDs`).
        migrator.registerMigration("v3") { db in
            try db.execute(sql: """
                CREATE TABLE outbox_v3 (
                    id INTEGER PRIMARY KEY NOT NULL, deviceID TEXT NOT NULL, "transaction" TEXT, command TEXT NOT NULL,
                    attribute TEXT, status TEXT NOT NULL, createdAt DATETIME NOT NULL, deadline DATETIME NOT NULL,
                    responseTopic TEXT, correlationData BLOB);
                INSERT INTO outbox_v3 (id, deviceID, "transaction", command, attribute, status, createdAt, deadline, responseTopic, correlationData)
                    SELECT id, deviceID, "transaction", command, attribute, status, createdAt, deadline, responseTopic, correlationData FROM outbox;
                DROP TABLE outbox;
                ALTER TABLE outbox_v3 RENAME TO outbox;
                """)
        }
        // v4: the Home Assistant discovery topics last published, so that an entity whose device
        // or mapping left the configuration is withdrawn at the next start (its config emptied).
        migrator.registerMigration("v4") { db in
            try db.execute(sql: "CREATE TABLE discoveryTopic (topic TEXT PRIMARY KEY NOT NULL) WITHOUT ROWID")
        }
        // v5: devices added over MQTT (bridge/request/device/add), their configuration as JSON in
        // the shape of a `devices[]` entry; the file's devices are never stored here.
        migrator.registerMigration("v5") { db in
            try db.execute(sql: """
                CREATE TABLE runtimeDevice (id TEXT PRIMARY KEY NOT NULL, config TEXT NOT NULL, addedAt DATETIME NOT NULL)
                """)
        }
        // v6: the messages being handled (a marker written before a message that can act is
        // handled, removed after), so that one which killed the process is not handled again.
        migrator.registerMigration("v6") { db in
            try db.execute(sql: """
                CREATE TABLE inflight (
                    topic TEXT NOT NULL, digest INTEGER NOT NULL, packetID INTEGER, responseTopic TEXT,
                    correlationData BLOB, payload BLOB NOT NULL, at DATETIME NOT NULL,
                    PRIMARY KEY (topic, digest)) WITHOUT ROWID
                """)
        }
        // v7: the options set over MQTT (bridge/request/options), kept across restarts and applied
        // over the configuration file at start (docs/bridge-api.md "options").
        migrator.registerMigration("v7") { db in
            try db.execute(sql: "CREATE TABLE bridgeOption (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID")
        }
        // v8: the last accepted encryption counter of each passive device with a bindkey (an
        // encrypted BTHome or MiBeacon sensor), so that an advertisement recorded before a restart
        // is still refused after it; `keyCheck` is the key's check value (the first 8 bytes of
        // AES_key(0), as a KCV: it tells keys apart and says nothing usable about the key), so
        // a new key starts over (a replaced sensor counts from zero).
        migrator.registerMigration("v8") { db in
            try db.execute(sql: """
                CREATE TABLE passiveCounter (deviceID TEXT PRIMARY KEY NOT NULL, counter INTEGER NOT NULL, keyCheck INTEGER NOT NULL) WITHOUT ROWID
                """)
        }
        do { try migrator.migrate(writer) } catch { throw .operationFailed(reason: "migration: \(error)") }
    }

    @discardableResult
    func write<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do { return try writer.write(body) } catch { throw .operationFailed(reason: "\(error)") }
    }

    /// One statement in SQLite's autocommit mode: atomic and durable like a transaction, without
    /// the `BEGIN`/`COMMIT` round (for the single-statement writes every command makes).
    func writeStatement(_ sql: String, _ arguments: StatementArguments) throws(StoreError) {
        do {
            try writer.writeWithoutTransaction { db in try db.cachedStatement(sql: sql).execute(arguments: arguments) }
        } catch {
            throw .operationFailed(reason: "\(error)")
        }
    }

    func read<T>(_ body: (Database) throws -> T) throws(StoreError) -> T {
        do { return try writer.read(body) } catch { throw .operationFailed(reason: "\(error)") }
    }

    // MARK: Backup

    /// A consistent copy of the database, made with SQLite's online backup API (a snapshot
    /// between two commits), as the bytes of a database file: written to a file of mode 0600 in
    /// `directory` (the system's temporary directory unless told), read back and removed.
    /// Throws ``StoreError/operationFailed(reason:)`` when the copy is larger than `limit` bytes.
    public func backup(limit: Int, directory: String? = nil) throws(StoreError) -> [UInt8] {
        let dir = directory ?? NSTemporaryDirectory()
        let path = (dir as NSString).appendingPathComponent("gatt2mqtt-backup-\(getpid())-\(UInt64.random(in: 0...UInt64.max)).sqlite")
        guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw .operationFailed(reason: "backup: cannot create \(path)")
        }
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            let copy = try DatabaseQueue(path: path)
            try writer.backup(to: copy)
            try copy.close()
        } catch {
            throw .operationFailed(reason: "backup: \(error)")
        }
        let size = ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? 0
        guard size <= limit else {
            throw .operationFailed(reason: "backup: the database copy is \(size) bytes, above the limit of \(limit) bytes")
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw .operationFailed(reason: "backup: cannot read \(path)") }
        return Array(data)
    }

    // MARK: Options set over MQTT (bridge/request/options)

    /// The options set by `bridge/request/options`, by key (`log_level`, `limits.max_payload`…),
    /// each a JSON value's text; applied over the configuration file at start.
    public func options() throws(StoreError) -> [(key: String, value: String)] {
        try read { db in try Row.fetchAll(db, sql: "SELECT key, value FROM bridgeOption ORDER BY key").map { ($0["key"], $0["value"]) } }
    }

    /// Keeps `value` (a JSON value's text) for `key`.
    public func setOption(_ key: String, value: String) throws(StoreError) {
        try writeStatement("INSERT INTO bridgeOption (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", [key, value])
    }

    /// Forgets an option (the file's value applies again at the next start).
    public func removeOption(_ key: String) throws(StoreError) {
        try writeStatement("DELETE FROM bridgeOption WHERE key = ?", [key])
    }

    // MARK: Home Assistant discovery

    /// The discovery config topics published last (see ``replaceDiscoveryTopics(_:)``).
    public func discoveryTopics() throws(StoreError) -> Set<String> {
        try read { db in Set(try String.fetchAll(db, sql: "SELECT topic FROM discoveryTopic")) }
    }

    /// Records the discovery config topics now published, replacing the previous set.
    public func replaceDiscoveryTopics(_ topics: Set<String>) throws(StoreError) {
        try write { db in
            try db.execute(sql: "DELETE FROM discoveryTopic")
            for t in topics.sorted() { try db.execute(sql: "INSERT INTO discoveryTopic (topic) VALUES (?)", arguments: [t]) }
        }
    }

    // MARK: Devices added at runtime

    /// The devices added over MQTT, oldest first: (id, configuration JSON text).
    public func runtimeDevices() throws(StoreError) -> [(id: String, config: String)] {
        try read { db in
            try Row.fetchAll(db, sql: "SELECT id, config FROM runtimeDevice ORDER BY addedAt, id").map { ($0["id"], $0["config"]) }
        }
    }

    /// Adds or replaces a runtime device's configuration (its place in the order is kept).
    public func saveRuntimeDevice(id: String, config: String, at date: Date = Date()) throws(StoreError) {
        try writeStatement("""
            INSERT INTO runtimeDevice (id, config, addedAt) VALUES (?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET config = excluded.config
            """, [id, config, date.timeIntervalSince1970])
    }

    /// Forgets a runtime device's configuration (its registry row, state, queued commands and
    /// history too).
    public func removeRuntimeDevice(id: String) throws(StoreError) {
        try write { db in
            try db.execute(sql: "DELETE FROM runtimeDevice WHERE id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM device WHERE id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM deviceState WHERE deviceID = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM outbox WHERE deviceID = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM passiveCounter WHERE deviceID = ?", arguments: [id])
        }
    }

    /// Renames a device everywhere in one transaction: registry, state, queued commands, history,
    /// and its runtime configuration (replaced by `config`, which carries the new id).
    public func renameDevice(from old: String, to new: String, config: String?) throws(StoreError) {
        try write { db in
            try db.execute(sql: "UPDATE device SET id = ? WHERE id = ?", arguments: [new, old])
            try db.execute(sql: "UPDATE deviceState SET deviceID = ? WHERE deviceID = ?", arguments: [new, old])
            try db.execute(sql: "UPDATE outbox SET deviceID = ? WHERE deviceID = ?", arguments: [new, old])
            try db.execute(sql: "UPDATE event SET deviceID = ? WHERE deviceID = ?", arguments: [new, old])
            try db.execute(sql: "UPDATE passiveCounter SET deviceID = ? WHERE deviceID = ?", arguments: [new, old])
            if let config {
                try db.execute(sql: "UPDATE runtimeDevice SET id = ?, config = ? WHERE id = ?", arguments: [new, config, old])
            }
        }
    }

    // MARK: Device registry

    public func upsertDevice(_ device: DeviceRecord) throws(StoreError) {
        try write { db in try device.upsert(db) }
    }

    public func devices() throws(StoreError) -> [DeviceRecord] {
        try read { db in try DeviceRecord.order(Column("id")).fetchAll(db) }
    }

    public func removeDevice(_ id: String) throws(StoreError) {
        try write { db in
            _ = try DeviceRecord.deleteOne(db, key: id)
            try db.execute(sql: "DELETE FROM deviceState WHERE deviceID = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM passiveCounter WHERE deviceID = ?", arguments: [id])
        }
    }

    /// Records that the device was paired (bonded) with the adapter.
    public func markPaired(_ deviceID: String, _ paired: Bool = true) throws(StoreError) {
        try write { db in
            try db.execute(sql: "UPDATE device SET paired = ? WHERE id = ?", arguments: [paired, deviceID])
        }
    }

    public func markSeen(_ deviceID: String, at date: Date) throws(StoreError) {
        try writeStatement("UPDATE device SET lastSeen = ? WHERE id = ?", [date.timeIntervalSince1970, deviceID])
    }

    // MARK: Last known state

    static let saveStateSQL =
        "INSERT INTO deviceState (deviceID, state, updatedAt) VALUES (?, ?, ?) ON CONFLICT(deviceID) DO UPDATE SET state = excluded.state, updatedAt = excluded.updatedAt"

    /// Replaces a device's merged state.
    public func saveState(_ state: JSONObject, for deviceID: String, at date: Date) throws(StoreError) {
        try apply([.saveState(deviceID: deviceID, json: JSONValue.object(state).jsonText, at: date.timeIntervalSince1970)])
    }

    /// Every device's last saved state.
    public func states() throws(StoreError) -> [String: JSONObject] {
        let rows = try read { db in try Row.fetchAll(db, sql: "SELECT deviceID, state FROM deviceState") }
        var out: [String: JSONObject] = [:]
        for row in rows {
            let id: String = row["deviceID"]
            let text: String = row["state"]
            if let o = (try? JSONValue(parsing: text))?.objectValue { out[id] = o }
        }
        return out
    }

    // MARK: Passive devices' counters

    static let saveCounterSQL =
        "INSERT INTO passiveCounter (deviceID, counter, keyCheck) VALUES (?, ?, ?) ON CONFLICT(deviceID) DO UPDATE SET counter = excluded.counter, keyCheck = excluded.keyCheck"

    /// The last accepted encryption counter of a passive device under the key whose check value
    /// is `keyCheck` (nil: none stored, or stored under another key). Written with
    /// ``Write/saveCounter(deviceID:counter:keyCheck:)``.
    public func passiveCounter(for deviceID: String, keyCheck: Int64) throws(StoreError) -> UInt32? {
        let row = try read { db in
            try Row.fetchOne(db, sql: "SELECT counter, keyCheck FROM passiveCounter WHERE deviceID = ?", arguments: [deviceID])
        }
        guard let row, row["keyCheck"] as Int64 == keyCheck else { return nil }
        return UInt32(exactly: row["counter"] as Int64)
    }

    // MARK: Outbox

    /// Adds a command; with `replacingAttribute` (latest-wins) queued commands for the same
    /// device and attribute are removed first and returned.
    @discardableResult
    public func enqueue(_ entry: OutboxEntry, replacingSameAttribute: Bool = false) throws(StoreError) -> (entry: OutboxEntry, replaced: [OutboxEntry]) {
        let insert = """
            INSERT INTO outbox (id, deviceID, "transaction", command, attribute, status, createdAt, deadline, responseTopic, correlationData)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """
        let id = outboxIDs.take()
        func bind(_ s: inout DirectStatement) {
            s.bind(id)
            s.bind(entry.deviceID)
            s.bind(entry.transaction)
            s.bind(entry.command)
            s.bind(entry.attribute)
            s.bind(entry.status.rawValue)
            s.bind(entry.createdAt.timeIntervalSince1970)
            s.bind(entry.deadline.timeIntervalSince1970)
            s.bind(entry.responseTopic)
            s.bind(entry.correlationData)
        }
        var e = entry
        e.id = id
        if !replacingSameAttribute || entry.attribute == nil {
            // The common case, once per command: one statement, no transaction around it.
            do {
                try writer.writeWithoutTransaction { db in try DirectStatement.run(insert, in: db, bind) }
                return (e, [])
            } catch {
                throw .operationFailed(reason: "\(error)")
            }
        }
        return try write { db in
            var replaced: [OutboxEntry] = []
            if replacingSameAttribute, let attribute = entry.attribute {
                let request = OutboxEntry.filter(Column("deviceID") == entry.deviceID && Column("attribute") == attribute && Column("status") == OutboxEntry.Status.queued.rawValue)
                replaced = try request.fetchAll(db)
                try request.deleteAll(db)
            }
            try DirectStatement.run(insert, in: db, bind)
            return (e, replaced)
        }
    }

    public func setStatus(_ status: OutboxEntry.Status, for id: Int64) throws(StoreError) {
        do {
            try writer.writeWithoutTransaction { db in
                try DirectStatement.run("UPDATE outbox SET status = ? WHERE id = ?", in: db) { s in
                    s.bind(status.rawValue)
                    s.bind(id)
                }
            }
        } catch {
            throw .operationFailed(reason: "\(error)")
        }
    }

    static let removeCommandSQL = "DELETE FROM outbox WHERE id = ?"

    /// Removes a command that reached a terminal status.
    public func removeCommand(_ id: Int64) throws(StoreError) {
        try apply([.removeCommand(id)])
    }

    /// Commands not yet finished, oldest first (optionally for one device).
    public func pendingCommands(for deviceID: String? = nil) throws(StoreError) -> [OutboxEntry] {
        try read { db in
            var request = OutboxEntry.order(Column("id"))
            if let deviceID { request = request.filter(Column("deviceID") == deviceID) }
            return try request.fetchAll(db)
        }
    }

    /// Removes and returns queued commands whose deadline is at or before `now`.
    public func takeExpired(now: Date) throws(StoreError) -> [OutboxEntry] {
        try write { db in
            let request = OutboxEntry.filter(Column("deadline") <= now.timeIntervalSince1970 && Column("status") == OutboxEntry.Status.queued.rawValue).order(Column("id"))
            let expired = try request.fetchAll(db)
            try request.deleteAll(db)
            return expired
        }
    }

    // MARK: An answer's writes in one commit

    /// One write of ``apply(_:)``: the writes a command's answer makes.
    public enum Write: Sendable, Equatable {
        /// Removes a command's outbox entry (the command reached a terminal status).
        case removeCommand(Int64)
        /// Replaces a device's merged state by `json`, the state object's JSON text (the text
        /// the bridge publishes retained, so it is encoded once); `at` in seconds since 1970.
        case saveState(deviceID: String, json: String, at: Double)
        /// Records a passive device's last accepted encryption counter under its key's check value
        /// (``passiveCounter(for:keyCheck:)``); staged with the reading's state when it has one.
        case saveCounter(deviceID: String, counter: UInt32, keyCheck: Int64)
    }

    /// Applies `writes` in order in one commit: all of them or, on an error, none. One write is
    /// a single autocommit statement; several are one `BEGIN IMMEDIATE … COMMIT`.
    ///
    /// An answer's writes (the command's entry removed, the device's new state) go through
    /// here before anything about them is published: the state is in SQLite no later than its
    /// retained publish, since the bridge republishes retained state from SQLite at start
    /// (shared/spec/bridge.md point 6, durable state; docs/configuration.md, "State database").
    ///
    /// Batching: a caller may gather the answers of several sessions (one event-loop turn) into
    /// one call. It must then hold back every publish that depends on those writes — the
    /// responses and the retained states — until this call returned, and it never puts a
    /// command's `sent` entry in a batch: ``enqueue(_:replacingSameAttribute:)`` commits at once,
    /// before the first byte goes to the device (at most once).
    public func apply(_ writes: [Write]) throws(StoreError) {
        guard !writes.isEmpty else { return }
        do {
            try writer.writeWithoutTransaction { db in
                if writes.count == 1 { return try Self.execute(writes[0], in: db) }
                // Cached BEGIN/COMMIT statements: GRDB's `inTransaction` prepares both anew each
                // time (and allocates twice as much).
                try db.cachedStatement(sql: "BEGIN IMMEDIATE").execute()
                do {
                    for w in writes { try Self.execute(w, in: db) }
                    try db.cachedStatement(sql: "COMMIT").execute()
                } catch {
                    if db.isInsideTransaction { try? db.execute(sql: "ROLLBACK") }
                    throw error
                }
            }
        } catch {
            throw .operationFailed(reason: "\(error)")
        }
    }

    private static func execute(_ write: Write, in db: Database) throws {
        switch write {
        case let .removeCommand(id):
            try DirectStatement.run(removeCommandSQL, in: db) { $0.bind(id) }
        case let .saveState(deviceID, json, at):
            try DirectStatement.run(saveStateSQL, in: db) { s in
                s.bind(deviceID)
                s.bind(json)
                s.bind(at)
            }
        case let .saveCounter(deviceID, counter, keyCheck):
            try DirectStatement.run(saveCounterSQL, in: db) { s in
                s.bind(deviceID)
                s.bind(Int64(counter))
                s.bind(keyCheck)
            }
        }
    }

    // MARK: Event history

    /// Appends an event and keeps the history within `maxCount` entries and `maxAge`.
    public func appendEvent(_ event: EventRecord, maxCount: Int, maxAge: Duration) throws(StoreError) {
        let ageSeconds = Double(maxAge.components.seconds)
        try write { db in
            var e = event
            try e.insert(db)
            try db.execute(sql: "DELETE FROM event WHERE at < ?", arguments: [event.at.timeIntervalSince1970 - ageSeconds])
            try db.execute(sql: "DELETE FROM event WHERE id <= (SELECT id FROM event ORDER BY id DESC LIMIT 1 OFFSET ?)", arguments: [maxCount])
        }
    }

    /// The newest events first.
    public func recentEvents(limit: Int) throws(StoreError) -> [EventRecord] {
        try read { db in try EventRecord.order(Column("id").desc).limit(limit).fetchAll(db) }
    }
}

/// A message being handled (``BridgeStore/markInflight(_:)``): what is needed to recognise it
/// when the broker delivers it again, and to answer it.
public struct InflightMessage: Sendable, Equatable {
    /// How much of the payload is kept (enough for its `transaction`; the digest covers all of it).
    public static let payloadPrefix = 1024

    public var topic: String
    /// ``digest(_:)`` of the whole payload.
    public var digest: Int64
    public var packetID: Int?
    public var responseTopic: String?
    public var correlationData: [UInt8]?
    /// The payload's first ``payloadPrefix`` bytes.
    public var payload: [UInt8]
    public var at: Date

    public init(topic: String, payload: [UInt8], packetID: Int?, responseTopic: String? = nil,
                correlationData: [UInt8]? = nil, at: Date) {
        self.topic = topic
        self.digest = Self.digest(payload)
        self.packetID = packetID
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.payload = Array(payload.prefix(Self.payloadPrefix))
        self.at = at
    }

    /// FNV-1a (64-bit) of the bytes and their count: tells the same payload from another
    /// (not a cryptographic digest: only the bridge's own markers are compared with it).
    public static func digest(_ bytes: [UInt8]) -> Int64 {
        var h = FNV1a()
        h.add(bytes)
        h.add(word: UInt64(bytes.count))
        return Int64(bitPattern: h.value)
    }
}

extension BridgeStore {
    static let markInflightSQL = """
        INSERT OR REPLACE INTO inflight (topic, digest, packetID, responseTopic, correlationData, payload, at)
        VALUES (?, ?, ?, ?, ?, ?, ?)
        """
    static let clearInflightSQL = "DELETE FROM inflight WHERE topic = ? AND digest = ?"

    /// Records that `message` is being handled (on the hot path of every command): in the mapped
    /// marker file when it fits (no commit, no system call), else one statement.
    public func markInflight(_ message: InflightMessage) throws(StoreError) {
        if markers?.mark(message) == true { return }
        try writeStatement(Self.markInflightSQL, [message.topic, message.digest, message.packetID, message.responseTopic,
                                                  message.correlationData.map { Data($0) }, Data(message.payload),
                                                  message.at.timeIntervalSince1970])
    }

    /// The message was handled: its marker goes.
    public func clearInflight(topic: String, digest: Int64) throws(StoreError) {
        if markers?.clear(topic: topic, digest: digest) == true { return }
        try writeStatement(Self.clearInflightSQL, [topic, digest])
    }

    /// Removes and returns the markers left (by a process that died while handling them), oldest first.
    public func takeInflight() throws(StoreError) -> [InflightMessage] {
        let mapped = markers?.take() ?? []
        let stored = try write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT * FROM inflight ORDER BY at")
            try db.execute(sql: "DELETE FROM inflight")
            return rows.map { row in
                let payload: Data = row["payload"]
                var m = InflightMessage(topic: row["topic"], payload: [], packetID: row["packetID"], responseTopic: row["responseTopic"],
                                        correlationData: (row["correlationData"] as Data?).map { Array($0) },
                                        at: Date(timeIntervalSince1970: row["at"]))
                m.digest = row["digest"]
                m.payload = Array(payload)
                return m
            }
        }
        return (mapped + stored).sorted { $0.at < $1.at }
    }

    /// Removes every marker (a clean stop: nothing is being handled any more).
    public func clearAllInflight() throws(StoreError) {
        markers?.clearAll()
        try write { db in try db.execute(sql: "DELETE FROM inflight") }
    }
}
