<?php
// A stock-update worker: takes the Fence lease for one SKU, then sets its
// quantity in MariaDB/MySQL in one transaction that first advances the guard
// row with the lease's fencing token. A worker whose lease ran out while it
// was paused is refused by the database, not by a check of its own.
//
//   php worker.php --sku sku-42 --qty 8 --ttl 5 --wait 30
//
//   php worker.php --sku sku-42 --add -1 --op-id order-1001 --wait 30
//
// The second form is a sale: a delta applied at most once per op_id, however
// often it is retried (guard/mysql's Do). A transaction that meets a
// transient conflict (FenceGuard's RetryableException: MariaDB's 1020 under
// snapshot isolation, a deadlock, a lock wait timeout) is rolled back and run
// again, up to TX_TRIES times in all. Prints one key=value line per step;
// exit codes as the fence CLI's: 0 written, 1 error, 2 usage, 3 busy,
// 4 refused (a stale token, an op_id reused for another operation, a token
// whose proof does not verify).
//
// With --keys FILE (the key set of `fence keys --json`), the lease's signed
// token is verified before the MySQL transaction (FenceProof.php: sodium's
// Ed25519, the rules of Go's KeySet.Verify): a token that is not this lock's
// grant by this cluster — no proof, a flipped byte, another lock's or
// another cluster's proof, an unknown key — is refused (FORGED_TOKEN) and
// nothing is written. --allow-unsigned accepts a lease without a proof
// (migration only: a made-up token is then compared, and a large one
// poisons the guard row).

declare(strict_types=1);

require __DIR__ . '/lib/FenceClient.php';
require __DIR__ . '/lib/FenceGuard.php';
require __DIR__ . '/lib/FenceProof.php';

use Shop\Fence\FenceClient;
use Shop\Fence\FenceException;
use Shop\Fence\FenceGuard;
use Shop\Fence\ForgedTokenException;
use Shop\Fence\KeySet;
use Shop\Fence\MalformedTokenException;
use Shop\Fence\OpConflictException;
use Shop\Fence\RetryableException;
use Shop\Fence\StaleTokenException;

const EXIT_ERROR = 1, EXIT_USAGE = 2, EXIT_BUSY = 3, EXIT_REFUSED = 4;
const TX_TRIES = 3; // runs of one transaction that meets RetryableException, in all

set_exception_handler(static function (Throwable $e): void {
    say('error ' . get_class($e) . " ({$e->getMessage()})"); // e.g. a reply that is not Fence's JSON
    exit(EXIT_ERROR);
});

function usage(string $why): never
{
    fwrite(STDERR, "worker.php: $why\n"
        . "usage: php worker.php --sku SKU (--qty N | --add DELTA --op-id ID [--attempts N])\n"
        . "         [--ttl SECONDS] [--wait SECONDS] [--owner NAME] [--server URL]\n"
        . "         [--dsn PDO_DSN] [--user U] [--password P]\n"
        . "         [--stock-table T] [--guard-table T] [--ops-table T] [--pause-before-write]\n"
        . "         [--read-first] [--init-sql SQL] [--keys FILE [--allow-unsigned]]\n");
    exit(EXIT_USAGE);
}

function say(string $line): void
{
    fwrite(STDOUT, $line . "\n");
    fflush(STDOUT);
}

$known = ['server:', 'dsn:', 'user:', 'password:', 'sku:', 'qty:', 'add:', 'op-id:', 'attempts:', 'ttl:', 'wait:',
    'owner:', 'stock-table:', 'guard-table:', 'ops-table:', 'pause-before-write', 'read-first', 'init-sql:', 'keys:', 'allow-unsigned', 'help'];
foreach (array_slice($argv, 1) as $arg) { // getopt skips what it does not know: a typo would go unseen
    $name = substr(explode('=', $arg, 2)[0], 2);
    if (str_starts_with($arg, '--') && !in_array($name, $known, true) && !in_array("$name:", $known, true)) {
        usage("unknown option $arg");
    }
}
$opt = getopt('', $known, $rest);
if ($opt === false || isset($opt['help']) || $rest < $argc) {
    usage($rest < $argc ? "unexpected argument '{$argv[$rest]}'" : 'help');
}
foreach ($opt as $name => $v) {
    if (is_array($v)) {
        usage("--$name given more than once");
    }
}
$num = static function (string $name, string $default) use ($opt): float {
    $v = $opt[$name] ?? $default;
    if (!is_numeric($v) || (float) $v < 0) {
        usage("--$name: want a number of seconds >= 0, got '$v'");
    }
    return (float) $v;
};
$server = $opt['server'] ?? getenv('FENCE_SERVER') ?: 'http://127.0.0.1:7420';
$dsn = $opt['dsn'] ?? getenv('FENCE_MYSQL_DSN') ?: 'mysql:host=127.0.0.1;port=3306;dbname=test;charset=utf8mb4';
$user = $opt['user'] ?? getenv('FENCE_MYSQL_USER') ?: 'root';
$password = $opt['password'] ?? getenv('FENCE_MYSQL_PASSWORD') ?: '';
$sku = $opt['sku'] ?? 'sku-42';
// The lock is "stock/<sku>": a SKU must make a valid Fence lock name (Go's
// fence.ValidateName: not empty, valid UTF-8, at most 512 bytes) — checked
// here, with the reason, instead of by a server's INVALID_ARGUMENT after
// the database was touched. The stock and guard rows are keyed by the
// exact bytes (VARBINARY): "SKU-42", "sku-42" and "sku-42 " are three SKUs.
const MAX_NAME_BYTES = 512, LOCK_PREFIX = 'stock/';
if (!is_string($sku) || $sku === '') {
    usage('--sku: want a SKU (not empty)');
}
if (preg_match('//u', $sku) !== 1) { // PCRE's UTF-8 check: no mbstring needed
    usage('--sku: want valid UTF-8, got bytes ' . bin2hex($sku));
}
if (strlen(LOCK_PREFIX . $sku) > MAX_NAME_BYTES) {
    usage('--sku: want at most ' . (MAX_NAME_BYTES - strlen(LOCK_PREFIX)) . ' bytes (the lock name "' . LOCK_PREFIX
        . '<sku>" is at most ' . MAX_NAME_BYTES . ' bytes), got ' . strlen($sku));
}
$qty = $opt['qty'] ?? null;
$add = $opt['add'] ?? null;
$opId = $opt['op-id'] ?? null;
if (($qty === null) === ($add === null)) {
    usage('give --qty (set the stock) or --add with --op-id (a delta, applied once)');
}
if ($qty !== null && !preg_match('/^\d{1,9}$/', $qty)) {
    usage("--qty: want a whole number 0..999999999, got '$qty'");
}
if ($add !== null && !preg_match('/^-?\d{1,9}$/', $add)) {
    usage("--add: want a whole number, got '$add'");
}
if (($add === null) !== ($opId === null) || $opId === '') {
    usage('--add needs --op-id (the same for every retry of the operation: e.g. the order id), and --op-id needs --add');
}
$attempts = $opt['attempts'] ?? '1';
if (!preg_match('/^[1-9]$/', $attempts)) {
    usage("--attempts: want 1..9, got '$attempts'");
}
$ttl = $num('ttl', '5');
$wait = $num('wait', '0');
$owner = $opt['owner'] ?? gethostname() . ':' . getmypid();
$stockTable = $opt['stock-table'] ?? 'shop_stock';
if (!preg_match('/^[A-Za-z_][A-Za-z0-9_]{0,63}$/', $stockTable)) {
    usage("--stock-table: want a plain identifier, got '$stockTable'");
}
$lockName = "stock/$sku"; // the lease and the guard row share the name

// The key set that proofs are verified with (`fence keys --json > fence-keys.json`).
$keysFile = $opt['keys'] ?? (getenv('FENCE_KEYS') ?: null);
$allowUnsigned = isset($opt['allow-unsigned']);
if ($allowUnsigned && $keysFile === null) {
    usage('--allow-unsigned needs --keys (without a key set no proof is checked)');
}
$keySet = null;
if ($keysFile !== null) {
    try {
        $keySet = KeySet::fromFile($keysFile);
    } catch (RuntimeException | JsonException $e) {
        fwrite(STDERR, "worker.php: --keys $keysFile: {$e->getMessage()}\n");
        exit(EXIT_ERROR);
    }
}

try {
    // PDO's defaults otherwise (emulated prepares: numbers come back as strings).
    // --init-sql runs first on the connection, e.g. "SET SESSION
    // innodb_snapshot_isolation=ON" to behave as MariaDB 11.8's default.
    $pdo = new PDO($dsn, $user, $password, [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]
        + (isset($opt['init-sql']) ? [PDO::MYSQL_ATTR_INIT_COMMAND => $opt['init-sql']] : []));
    $guard = new FenceGuard($pdo, $opt['guard-table'] ?? 'fence_guard', $opt['ops-table'] ?? 'fence_ops');
    $guard->migrate();
    // sku is VARBINARY: compared byte for byte, never truncated. A VARCHAR
    // with the default collation would make "SKU-42", "sku-42" and
    // "sku-42 " one row (case-insensitive, trailing spaces ignored) while
    // their locks and guard rows are three: two owners writing one row.
    $pdo->exec("CREATE TABLE IF NOT EXISTS `$stockTable` (
        sku VARBINARY(" . (MAX_NAME_BYTES - strlen(LOCK_PREFIX)) . ") NOT NULL PRIMARY KEY,
        qty INT NOT NULL
    ) ENGINE=InnoDB");
    // A table made by an older worker keeps its VARCHAR(64): refuse it.
    $st = $pdo->prepare('SELECT DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?');
    $st->execute([$stockTable, 'sku']);
    $type = strtolower((string) $st->fetchColumn());
    if ($type !== 'varbinary') {
        fwrite(STDERR, "worker.php: table $stockTable: column sku is $type, want varbinary (exact bytes, no collation); run: ALTER TABLE `$stockTable` MODIFY sku VARBINARY("
            . (MAX_NAME_BYTES - strlen(LOCK_PREFIX)) . ") NOT NULL\n");
        exit(EXIT_ERROR);
    }
} catch (PDOException | InvalidArgumentException $e) {
    fwrite(STDERR, "worker.php: database: {$e->getMessage()}\n");
    exit(EXIT_ERROR);
}

$fence = new FenceClient($server);
try {
    $lease = $fence->acquire($lockName, $owner, $ttl, $wait);
} catch (FenceException $e) {
    if ($e->reason === 'BUSY') {
        say(sprintf('busy lock=%s holder=%s holder_token=%d retry_after=%s (%s)', $lockName,
            $e->facts['holder'] ?? '?', FenceClient::int($e->facts['holderToken'] ?? 0, 'holderToken'),
            $e->retryAfter ?? '-', $e->getMessage()));
        exit(EXIT_BUSY);
    }
    say("error reason={$e->reason} status={$e->httpStatus} ({$e->getMessage()})");
    exit($e->reason === 'INVALID_ARGUMENT' ? EXIT_USAGE : EXIT_ERROR);
}
$token = $lease->token; // an int
say("acquired lock=$lockName token=$token ttl={$lease->ttl} owner=$owner");

// Verify, then compare: the proof is checked here, before the transaction;
// the guard row compares the number in it.
if ($keySet !== null) {
    $refuse = static function (string $line) use ($fence, $lockName, $token): never {
        say($line);
        try {
            $fence->release($lockName, $token);
            say("released lock=$lockName token=$token");
        } catch (FenceException $e) {
            say("release_refused reason={$e->reason} ({$e->getMessage()})");
        }
        exit(EXIT_REFUSED);
    };
    if ($lease->signedToken === null && $allowUnsigned) {
        say("unsigned lock=$lockName token=$token (no proof in the reply; --allow-unsigned)");
    } else {
        try {
            $st = $keySet->verify($lease->signedToken ?? (string) $token, $lockName);
            if ($st->token !== $token) {
                $refuse("refused reason=FORGED_TOKEN kind=token-mismatch token=$token signed_token={$st->token} (the lease's token and its proof's differ)");
            }
            say("verified lock=$lockName token=$token cluster={$st->clusterId} key={$st->keyId}");
        } catch (ForgedTokenException $e) {
            $refuse("refused reason=FORGED_TOKEN kind=" . str_replace(' ', '-', $e->kind) . " token={$e->token} ({$e->getMessage()})");
        } catch (MalformedTokenException $e) {
            $refuse("refused reason=INVALID_ARGUMENT kind=malformed token=$token ({$e->getMessage()})");
        }
    }
}

$readFirst = isset($opt['read-first']);
if (isset($opt['pause-before-write']) && !$readFirst) {
    fgets(STDIN); // the slow part of the job: a test freezes the process here (SIGSTOP)
}

// What the worker can know of its lease now. It writes anyway: the check that
// counts is the database's, a pause right after this one would defeat it.
try {
    $lock = $fence->getLock($lockName);
    if ($lock['lastToken'] > $token) {
        say("note lease_lost=true lock=$lockName last_token={$lock['lastToken']} mine=$token (writing anyway: the database decides)");
    }
} catch (FenceException $e) {
    say("note lock_state_unknown reason={$e->reason}");
}

$code = 0;
if ($add !== null) {
    // A sale: the delta is applied once per op_id. The payload names the
    // operation, so the same op_id for a different one is refused.
    $payload = "sku=$sku add=$add";
    $apply = static function (PDO $pdo) use ($stockTable, $sku, $add): string {
        $st = $pdo->prepare("UPDATE `$stockTable` SET qty = qty + ? WHERE sku = ?");
        $st->bindValue(1, (int) $add, PDO::PARAM_INT);
        $st->bindValue(2, $sku);
        $st->execute();
        $st = $pdo->prepare("SELECT qty FROM `$stockTable` WHERE sku = ?");
        $st->execute([$sku]);
        $qty = $st->fetchColumn();
        if ($qty === false) {
            throw new RuntimeException("no stock row for $sku");
        }
        return (string) $qty; // the result a retry gets back
    };
    for ($i = 0, $try = 1; $i < (int) $attempts && $code === 0; $i++) {
        try {
            [$result, $replayed] = $guard->once($lockName, $token, $opId, $payload, $apply);
            say(($replayed ? 'replayed' : 'applied') . " op_id=$opId sku=$sku qty=$result token=$token");
            $try = 1;
        } catch (RetryableException $e) {
            if ($try >= TX_TRIES) {
                say("error database mysql_error={$e->mysqlError} tries=$try ({$e->getMessage()})");
                $code = EXIT_ERROR;
                break;
            }
            say("retry mysql_error={$e->mysqlError} try=$try ({$e->getMessage()})"); // nothing applied: same op_id again
            $try++;
            $i--;
        } catch (StaleTokenException $e) {
            say("refused reason=STALE_TOKEN token={$e->token} last_accepted={$e->lastAccepted} ({$e->getMessage()})");
            $code = EXIT_REFUSED;
        } catch (OpConflictException $e) {
            say("refused reason=OP_CONFLICT op_id=$opId ({$e->getMessage()})");
            $code = EXIT_REFUSED;
        } catch (PDOException $e) {
            say("error database ({$e->getMessage()})");
            $code = EXIT_ERROR;
        }
    }
} else {
    // The transaction, run again (from BEGIN) after a RetryableException.
    for ($try = 1; ; $try++) {
        try {
            $pdo->beginTransaction();
            if ($readFirst) {
                // The Bitrix flow: read the product first, then guard + write. The
                // read opens a REPEATABLE READ snapshot; under MariaDB's
                // innodb_snapshot_isolation a guard row committed since then makes
                // check() throw RetryableException (1020), even for a newer token.
                $st = $pdo->prepare("SELECT qty FROM `$stockTable` WHERE sku = ?");
                $st->execute([$sku]);
                $was = $st->fetchColumn();
                say('read sku=' . $sku . ' qty=' . ($was === false ? 'none' : (int) $was) . " token=$token try=$try");
                if ($try === 1 && isset($opt['pause-before-write'])) {
                    fgets(STDIN); // the slow part of the job, inside the transaction
                }
            }
            $guard->check($lockName, $token);
            $st = $pdo->prepare("INSERT INTO `$stockTable` (sku, qty) VALUES (?, ?) ON DUPLICATE KEY UPDATE qty = VALUES(qty)");
            $st->execute([$sku, $qty]);
            $pdo->commit();
            say("written sku=$sku qty=$qty token=$token");
        } catch (StaleTokenException $e) {
            $pdo->rollBack();
            say("refused reason=STALE_TOKEN token={$e->token} last_accepted={$e->lastAccepted} ({$e->getMessage()})");
            $code = EXIT_REFUSED;
        } catch (PDOException | RetryableException $e) {
            if ($pdo->inTransaction()) {
                $pdo->rollBack();
            }
            if ($e instanceof PDOException) {
                $e = FenceGuard::typed($e); // the write's own 1213 or 1205
            }
            if ($e instanceof RetryableException && $try < TX_TRIES) {
                say("retry mysql_error={$e->mysqlError} try=$try ({$e->getMessage()})"); // nothing was applied
                continue;
            }
            say("error database ({$e->getMessage()})");
            $code = EXIT_ERROR;
        }
        break;
    }
}

try {
    $fence->release($lockName, $token);
    say("released lock=$lockName token=$token");
} catch (FenceException $e) {
    // The lease had already ended: say why, in the server's words.
    say(sprintf('release_refused reason=%s last_token=%s (%s)', $e->reason, $e->lastToken ?? '-', $e->getMessage()));
}
exit($code);
