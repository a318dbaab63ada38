<?php
// The fencing-token check at the side effect, in MySQL/MariaDB (InnoDB), with
// PDO: the same table and the same one statement as Fence's Go guard
// (guard/mysql), so both can guard one table and `fence guard max-token
// --mysql` / `fence restore --floor-from mysql://` read it.
//
// check() must run inside the transaction that writes the data: the token
// advance and the write commit together or not at all, and the guard row's
// lock makes writers of one resource wait for each other.

declare(strict_types=1);

namespace Shop\Fence;

/** A write with a token older than one the guard already accepted. */
final class StaleTokenException extends \RuntimeException
{
    public function __construct(
        public readonly string $resource,
        public readonly int $token,
        public readonly int $lastAccepted,
    ) {
        parent::__construct("token $token is older than accepted token $lastAccepted");
    }
}

/**
 * A transient conflict in the database: nothing of the transaction was
 * applied (or the rest must be rolled back). Roll back and run the whole
 * transaction again, with the same token (and op_id). guard/mysql's
 * IsRetryable reports the same errors: 1020 "record has changed since last
 * read" (MariaDB's innodb_snapshot_isolation, ON by default from 11.8, under
 * REPEATABLE READ: the transaction read something before check() and a newer
 * or older writer committed the guard row since — even a newer token gets
 * it), 1213 deadlock (InnoDB rolled the transaction back) and 1205 lock wait
 * timeout (only the statement was rolled back).
 */
final class RetryableException extends \RuntimeException
{
    public function __construct(public readonly int $mysqlError, \PDOException $previous)
    {
        parent::__construct("retryable database conflict (MySQL error $mysqlError): roll back and run the transaction again: "
            . $previous->getMessage(), 0, $previous);
    }
}

/** An op_id already applied with a different payload. */
final class OpConflictException extends \RuntimeException
{
    public function __construct(public readonly string $opId)
    {
        parent::__construct("op_id '$opId' was already used for a different operation");
    }
}

final class FenceGuard
{
    /** MySQL/MariaDB errors after which the transaction may simply run again (guard/mysql's IsRetryable). */
    public const RETRYABLE_ERRORS = [1020, 1205, 1213];

    /** Whether $e is a conflict after which the same transaction may run again. */
    public static function isRetryable(\Throwable $e): bool
    {
        return $e instanceof RetryableException
            || ($e instanceof \PDOException && in_array((int) ($e->errorInfo[1] ?? 0), self::RETRYABLE_ERRORS, true));
    }

    /** $e as a RetryableException if it is one of RETRYABLE_ERRORS, else $e itself. */
    public static function typed(\PDOException $e): \RuntimeException
    {
        $code = (int) ($e->errorInfo[1] ?? 0);
        return in_array($code, self::RETRYABLE_ERRORS, true) ? new RetryableException($code, $e) : $e;
    }

    public function __construct(
        private readonly \PDO $pdo,
        private readonly string $table = 'fence_guard',
        private readonly string $opsTable = 'fence_ops',
    ) {
        foreach ([$table, $opsTable] as $t) {
            if (!preg_match('/^[A-Za-z_][A-Za-z0-9_]{0,63}$/', $t)) {
                throw new \InvalidArgumentException("guard table name: want a plain identifier, got '$t'");
            }
        }
    }

    /** guard/mysql's tables (Migrate's DDL for fence_guard and fence_ops). Idempotent. */
    public function migrate(): void
    {
        $this->pdo->exec("CREATE TABLE IF NOT EXISTS `{$this->table}` (
            resource   VARBINARY(512) NOT NULL,
            last_token BIGINT         NOT NULL,
            updated_at DATETIME(6)    NULL,
            PRIMARY KEY (resource)
        ) ENGINE=InnoDB");
        $index = substr($this->opsTable . '_created_at_idx', 0, 64);
        $this->pdo->exec("CREATE TABLE IF NOT EXISTS `{$this->opsTable}` (
            resource     VARBINARY(512) NOT NULL,
            op_id        VARBINARY(256) NOT NULL,
            payload_hash BINARY(32)     NOT NULL,
            result       LONGBLOB       NULL,
            token        BIGINT         NOT NULL,
            created_at   DATETIME(6)    NOT NULL,
            PRIMARY KEY (resource, op_id),
            KEY `$index` (created_at)
        ) ENGINE=InnoDB");
    }

    /**
     * Applies an operation at most once (guard/mysql's Do): in one READ
     * COMMITTED transaction, check the token (locking the guard row), look
     * up $opId — found: roll back and return its saved result, replayed,
     * even if the token has since been overtaken (a different $payload:
     * OpConflictException) — else refuse a stale token, call $apply($pdo)
     * for the write, save the op record and commit. A retry after a lost
     * reply, with the same $opId and $payload, does not apply twice.
     *
     * @param callable(\PDO): string $apply the write; returns the result to remember
     * @return array{0: string, 1: bool} [the result, replayed]
     */
    public function once(string $resource, int $token, string $opId, string $payload, callable $apply): array
    {
        if ($this->pdo->inTransaction()) {
            throw new \LogicException('FenceGuard::once runs its own transaction: call it outside one');
        }
        if ($opId === '' || strlen($opId) > 256) {
            throw new \InvalidArgumentException("op_id: want 1..256 bytes, got " . strlen($opId));
        }
        $hash = hash('sha256', $payload, true);
        // READ COMMITTED (for the next transaction only): the lookup must see
        // every op committed before this one got the guard row lock.
        $this->pdo->exec('SET TRANSACTION ISOLATION LEVEL READ COMMITTED');
        $this->pdo->beginTransaction();
        try {
            $stale = null;
            try {
                $this->check($resource, $token);
            } catch (StaleTokenException $e) {
                $stale = $e; // an applied op is replayed all the same
            }
            $saved = $this->lookupOp($resource, $opId, $hash);
            if ($saved !== null) {
                $this->pdo->rollBack();
                return [$saved, true];
            }
            if ($stale !== null) {
                throw $stale;
            }
            $result = $apply($this->pdo);
            $st = $this->pdo->prepare("INSERT INTO `{$this->opsTable}` (resource, op_id, payload_hash, result, token, created_at)
                VALUES (?, ?, ?, ?, ?, UTC_TIMESTAMP(6))");
            $st->bindValue(1, $resource);
            $st->bindValue(2, $opId);
            $st->bindValue(3, $hash, \PDO::PARAM_LOB);
            $st->bindValue(4, $result, \PDO::PARAM_LOB);
            $st->bindValue(5, $token, \PDO::PARAM_INT);
            try {
                $st->execute();
            } catch (\PDOException $e) {
                if (($e->errorInfo[1] ?? 0) !== 1062) {
                    throw $e;
                }
                // Saved meanwhile by code that did not hold the guard row lock: theirs stands.
                $this->pdo->rollBack();
                return [$this->lookupOp($resource, $opId, $hash) ?? throw $e, true];
            }
            $this->pdo->commit();
            return [$result, false];
        } catch (\PDOException $e) {
            throw self::typed($e); // 1213, 1205: run once() again with the same op_id
        } finally {
            if ($this->pdo->inTransaction()) {
                $this->pdo->rollBack();
            }
        }
    }

    /** The saved result of an applied op, null if none; OpConflictException for another payload. */
    private function lookupOp(string $resource, string $opId, string $hash): ?string
    {
        $st = $this->pdo->prepare("SELECT payload_hash, result FROM `{$this->opsTable}` WHERE resource = ? AND op_id = ?");
        $st->execute([$resource, $opId]);
        $row = $st->fetch(\PDO::FETCH_NUM);
        if ($row === false) {
            return null;
        }
        if (!hash_equals((string) $row[0], $hash)) {
            throw new OpConflictException($opId);
        }
        return (string) $row[1];
    }

    /**
     * Accepts $token for $resource if it is at least the last token accepted
     * there and records it — one statement, in the caller's transaction.
     * An equal token is accepted (the owner may write again). An older one
     * throws StaleTokenException: roll back, do not commit the write. A
     * transient conflict (1020 under MariaDB's snapshot isolation, 1213,
     * 1205) throws RetryableException: roll back and run the transaction
     * again — the token is not judged, nothing of it is applied.
     */
    public function check(string $resource, int $token): void
    {
        try {
            $this->checkStatements($resource, $token);
        } catch (\PDOException $e) {
            throw self::typed($e);
        }
    }

    private function checkStatements(string $resource, int $token): void
    {
        if (!$this->pdo->inTransaction()) {
            throw new \LogicException('FenceGuard::check outside a transaction: the token would commit apart from the write');
        }
        if ($token < 1 || $resource === '') {
            throw new \InvalidArgumentException("guard check: want a token >= 1 and a resource, got $token and '$resource'");
        }
        // The compare is inside the statement that writes: no moment between
        // reading last_token and advancing it. updated_at is assigned first so
        // both IFs see the old last_token (MySQL assigns left to right).
        $st = $this->pdo->prepare("INSERT INTO `{$this->table}` (resource, last_token, updated_at) VALUES (?, ?, UTC_TIMESTAMP(6))
            ON DUPLICATE KEY UPDATE
                updated_at = IF(last_token <= ?, UTC_TIMESTAMP(6), updated_at),
                last_token = IF(last_token <= ?, ?, last_token)");
        // Tokens bound as integers: with PDO's default emulated prepares a
        // plain execute([...]) would send '99' (a string) to compare.
        $st->bindValue(1, $resource, \PDO::PARAM_STR);
        foreach ([2, 3, 4, 5] as $i) {
            $st->bindValue($i, $token, \PDO::PARAM_INT);
        }
        $st->execute();
        if ($st->rowCount() === 2) {
            return; // an existing row was changed: only an accepted token changes it
        }
        // Inserted (1) or left as it was (0; 1 with MYSQL_ATTR_FOUND_ROWS):
        // read the row the statement locked.
        $st = $this->pdo->prepare("SELECT last_token FROM `{$this->table}` WHERE resource = ? FOR UPDATE");
        $st->execute([$resource]);
        $last = $st->fetchColumn();
        if ($last === false) {
            throw new \RuntimeException("guard row for '$resource' missing after the upsert (is `{$this->table}` InnoDB?)");
        }
        $last = (int) $last; // PDO MySQL hands BIGINT back as a string by default: "100" === 100 is false
        if ($last === $token) {
            return;
        }
        if ($last > $token) {
            throw new StaleTokenException($resource, $token, $last);
        }
        throw new \RuntimeException("guard row for '$resource' holds $last after advancing to $token");
    }
}
