import Foundation
import GRDB
import GRDBSQLite

/// The writes every command makes (its outbox row inserted, its status set, the row removed, the
/// device's state saved), bound and stepped through SQLite's C API on GRDB's cached statement.
///
/// GRDB's `execute(arguments:)` costs about as much again as SQLite's own work for these small
/// statements (docs/benchmarks.md, "Instructions per command, session 9"): an array of
/// `DatabaseValue`s built from existentials, its count checked, nested closures binding one value
/// each, then the observation bookkeeping before and after the step. These statements need none of that: the store
/// registers no transaction observers and no value observations, they never change the schema, and
/// the store does not mix them with GRDB's own execution of the same statement object. The
/// statement stays in GRDB's cache (finalized when the connection closes); anything else — the
/// migrations, reads, the rare writes — goes through GRDB as before.
struct DirectStatement {
    private let statement: SQLiteStatement
    private let sql: String
    private var index: Int32 = 0
    /// The first binding's error (SQLite reports a bad index or a value too big there).
    private var failure: Int32 = SQLITE_OK

    /// SQLite copies the bytes during the bind (SQLITE_TRANSIENT, `(sqlite3_destructor_type)-1`
    /// in C): the Swift string they come from need not outlive the call.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

    /// Runs `sql` once: `bind` binds its parameters in order, then it is stepped to its end and
    /// reset. Throws GRDB's `DatabaseError` (with SQLite's message) when a bind or the step fails.
    static func run(_ sql: String, in db: Database, _ bind: (inout DirectStatement) -> Void) throws {
        let cached = try db.cachedStatement(sql: sql)
        var s = DirectStatement(statement: cached.sqliteStatement, sql: sql)
        sqlite3_reset(s.statement)
        bind(&s)
        if s.index != sqlite3_bind_parameter_count(s.statement) {
            sqlite3_clear_bindings(s.statement)
            throw DatabaseError(resultCode: .SQLITE_RANGE, message: "\(s.index) values bound, the statement has \(sqlite3_bind_parameter_count(s.statement)) parameters", sql: sql)
        }
        var code = s.failure
        var message: String?
        if code == SQLITE_OK {
            code = sqlite3_step(s.statement)
            if code != SQLITE_DONE, code != SQLITE_ROW { message = String(cString: sqlite3_errmsg(db.sqliteConnection)) }
        } else {
            message = String(cString: sqlite3_errmsg(db.sqliteConnection))
        }
        // Every parameter is bound again at the next run: no `sqlite3_clear_bindings` (1.5k
        // instructions per command, measured).
        sqlite3_reset(s.statement)
        guard code == SQLITE_DONE else {
            throw DatabaseError(resultCode: ResultCode(rawValue: code == SQLITE_ROW ? SQLITE_MISUSE : code),
                                message: code == SQLITE_ROW ? "a write statement returned rows" : message, sql: sql)
        }
    }

    private mutating func next(_ code: Int32) {
        if failure == SQLITE_OK, code != SQLITE_OK { failure = code }
    }

    mutating func bind(_ value: Int64) {
        index += 1
        next(sqlite3_bind_int64(statement, index, value))
    }

    mutating func bind(_ value: Double) {
        index += 1
        next(sqlite3_bind_double(statement, index, value))
    }

    mutating func bind(_ value: String?) {
        index += 1
        guard var value else { return next(sqlite3_bind_null(statement, index)) }
        let code = value.withUTF8 { bytes -> Int32 in
            // An empty buffer may have no address, and a NULL pointer would bind NULL, not "".
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_text(statement, index, "", 0, Self.transient) }
            return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                sqlite3_bind_text64(statement, index, $0, UInt64(bytes.count), Self.transient, UInt8(SQLITE_UTF8))
            }
        }
        next(code)
    }

    mutating func bind(_ value: Data?) {
        index += 1
        guard let value else { return next(sqlite3_bind_null(statement, index)) }
        let code = value.withUnsafeBytes { bytes -> Int32 in
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_zeroblob(statement, index, 0) }
            return sqlite3_bind_blob64(statement, index, base, UInt64(bytes.count), Self.transient)
        }
        next(code)
    }
}
