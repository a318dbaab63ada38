<?php
// Runs lib/FenceProof.php against Fence's cross-language test vectors
// (testdata/proof-vectors.json at the repository's root, or the file given):
// every case must get the verdict Go's ParseSignedToken and KeySet.Verify
// give it. Prints one line per case that disagrees and a summary; exit 0
// when all agree, 1 otherwise. php_test.go runs it.
//
//   php tests/proof_vectors.php [../../testdata/proof-vectors.json]

declare(strict_types=1);

require __DIR__ . '/../lib/FenceProof.php';

use Shop\Fence\ForgedTokenException;
use Shop\Fence\KeySet;
use Shop\Fence\MalformedTokenException;

$path = $argv[1] ?? __DIR__ . '/../../../testdata/proof-vectors.json';
$vectors = json_decode((string) file_get_contents($path), true, 64, JSON_THROW_ON_ERROR);
$keys = KeySet::fromJson(json_encode($vectors['keySet'], JSON_THROW_ON_ERROR));

$failed = 0;
foreach ($vectors['cases'] as $case) {
    try {
        $keys->verify($case['token'], $case['lock']);
        $got = 'ok';
    } catch (ForgedTokenException $e) {
        $got = $e->kind;
    } catch (MalformedTokenException $e) {
        $got = 'malformed';
    }
    if ($got !== $case['expect']) {
        $failed++;
        echo "FAIL {$case['name']}: got '$got', want '{$case['expect']}' (token '{$case['token']}', lock '{$case['lock']}')\n";
    }
}
$n = count($vectors['cases']);
echo $failed === 0 ? "ok $n cases\n" : "FAIL $failed of $n cases\n";
exit($failed === 0 ? 0 : 1);
