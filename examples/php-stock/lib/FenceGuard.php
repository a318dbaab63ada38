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

final class FenceGuard
{
    public function __construct(
        private readonly \PDO $pdo,
        private readonly string $table = 'fence_guard',
    ) {
        if (!preg_match('/^[A-Za-z_][A-Za-z0-9_]{0,63}$/', $table)) {
            throw new \InvalidArgumentException("guard table name: want a plain identifier, got '$table'");
        }
    }

    /** guard/mysql's table (Migrate's DDL for fence_guard). Idempotent. */
    public function migrate(): void
    {
        $this->pdo->exec("CREATE TABLE IF NOT EXISTS `{$this->table}` (
            resource   VARBINARY(512) NOT NULL,
            last_token BIGINT         NOT NULL,
            updated_at DATETIME(6)    NULL,
            PRIMARY KEY (resource)
        ) ENGINE=InnoDB");
    }

    /**
     * Accepts $token for $resource if it is at least the last token accepted
     * there and records it — one statement, in the caller's transaction.
     * An equal token is accepted (the owner may write again). An older one
     * throws StaleTokenException: roll back, do not commit the write.
     */
    public function check(string $resource, int $token): void
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
