-- Tenants' credentials: the store, its SQL API and every refusal, encryption at
-- rest (AES-256-GCM under webhook_inbox.key_file), a GitHub App's key and JWT.
\set VERBOSITY default
\set SHOW_CONTEXT never
SET client_min_messages = warning;
-- runs a statement; its error with the detail, source ids made stable
CREATE FUNCTION wi_cred_try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	d text;
BEGIN
	EXECUTE q;
	RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
	GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
	RETURN regexp_replace(SQLSTATE || ': ' || SQLERRM || CASE WHEN d <> '' THEN ' | ' || d ELSE '' END,
						  'tenant_credentials\(\d+,', 'tenant_credentials(N,', 'g');
END
$$;
-- key files in the data directory, readable by the server's user only
CREATE FUNCTION wi_cred_key_file(name text, content text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
	EXECUTE format('COPY (SELECT %L) TO PROGRAM %L', content, 'umask 077 && cat > ' || name);
END
$$;
SELECT wi_cred_key_file('wi_regress_a.key', md5('key a') || md5('key a, second half'));
SELECT wi_cred_key_file('wi_regress_b.key', md5('key b') || md5('key b, second half'));
SELECT wi_cred_key_file('wi_regress_short.key', md5('too short'));
SELECT wi_cred_key_file('wi_regress_nothex.key', repeat('z', 64));
-- COPY TO a file leaves it readable by others (mode 0644)
DO $$ BEGIN EXECUTE format('COPY (SELECT %L) TO %L', md5('open') || md5('open 2'),
						   current_setting('data_directory') || '/wi_regress_open.key'); END $$;
CREATE TEMP TABLE pem (name text PRIMARY KEY, pem text NOT NULL);
INSERT INTO pem VALUES
('pkcs1', $k$-----BEGIN RSA PRIVATE KEY-----
MIIEpQIBAAKCAQEAv/J4LQRYWih1n2Tsinhx/xD4e0PrYupp1HgoXNyOcdrXSedA
NdqtdjUSv6ZFFDl9v0odWpJ1i4hmRRxCDr8Bl1R+8XfIjx9ir0sNGcomwf+wwH/e
YbhTZfMMop8KNSsFcZ1SlJYPiUhVhtMgH21HfU416o1wWmaRUa/MUvhfJv9uc0+L
1Tj9leDlOP1qOMBiFRUjrj95KowV6cCt1TWqP9dzXsZIOCN2pfFJ9ZlYKGDWh5Ys
vP8gx2v5mEMx6Ep74L2AV3XWytrafx6xQ1S75LrSBSlfEYJEhNfYhFSmsiMgo91z
NLAusizjMe0vWEN3p6UNqLn3ejIVa1mpJZLpzwIDAQABAoIBAAarQPuna/5t63BH
TGSfPK61Az0dJf+Az35/Uj+vtg9EoDhEHZoBaAd0XptkBoBmYvUTeSOddRINAiii
i7UBc+ezGtn+5Gv8liwq+mCMAn65CIYXqz1P7y3anPTFe9BPF1hUM/tPn2iQp9AQ
Y8xTuqki34KvuViaua/R4NJ9KKktJVzG8VoNAjzHXI0oOfm7q9VNJL8H9M+eMzQe
oWVsVazrEuIPrmU32F9ZnHIk9aWE1xVtf4USFtHybU7EuHmO9l4ItzghIvYehODW
IsRUglGRHd7++Jhe4o7MjKiT9TFps2QL7Ti5fXbRJGqQyhfusBP9E/ElxqUlarH+
xknpPjECgYEA35SrpDgxMx9LD+vVXbIXHYmDy1wpJItl5eAdiNBuRQ4+YyEWzle2
bkUJ8ZEwuDWGjRlSnNIUYOhxzRTdveoXDmcA7dFtbC98liumppD8gT1w3AZfzmel
CFb2kMdJXK/EfTwBspGjJ91LLoL1Dua/og5Mza+9eUasXD0y5tRIHykCgYEA28eO
3bhsKECqJUrSBq8s26cAwaWK79Iwxqf0mO0y+nh0xXXy4cWkDm1/XypZlTbROYxU
UefQHb6utKRyd6v3ZisG+L0VORwLhQuDVEj3zgnzypXL+NixZV0WhRwzrT34A1Xy
Ugvd5dr/P5DQs95e2BvbWXfzL0j9QLkPdFPReDcCgYEAhn0pmkjq33ONdXBJEmlU
GkJj8unnHcJ0cwiS+39VNVjSElMPIuQEKuSAjLznb4dS/oEi/o4oD/sCqXhJwjmT
0OgI2QVHKvKNoM91GXDRUvSgdNmou8IAtbmJ66DU8loQebyk0MNmP06QMNQ5kNMg
ptyvOnLiKJdoiruNaOh80bECgYEAl29QhHu/opiz5BBC2TI4wXy367ZKHmcBDtDJ
m9nMx4LaSvizi1dobDyMiCEhKsxjq7iCnRESeHxb2sJ40Paf+Djri9aVWg117o15
R0kj3kdDQTKoIeYFjadvjfZZsSRC0OGWn2vn0KpuN/lrpJQzW8sN//7DhLBROBiL
iob6jU8CgYEA2WuDGlM2r+mhzckPg5A8ZLQg1oX+2Bsufn2f10xCKXE/pkasUqGz
pUYZ5N5bdgI6Bkv6z+4nHU9m2ayjFawQ2QFG/zHTfzsoz/TQuLXzpvyOaBv3x8KQ
H+iX8me3JhSAyWrG9uPeuMiwVM/kee3vr6EBZKUqY4psf3ZLweoyAaU=
-----END RSA PRIVATE KEY-----
$k$),
('pkcs8', $k$-----BEGIN PRIVATE KEY-----
MIIEvwIBADANBgkqhkiG9w0BAQEFAASCBKkwggSlAgEAAoIBAQC/8ngtBFhaKHWf
ZOyKeHH/EPh7Q+ti6mnUeChc3I5x2tdJ50A12q12NRK/pkUUOX2/Sh1aknWLiGZF
HEIOvwGXVH7xd8iPH2KvSw0ZyibB/7DAf95huFNl8wyinwo1KwVxnVKUlg+JSFWG
0yAfbUd9TjXqjXBaZpFRr8xS+F8m/25zT4vVOP2V4OU4/Wo4wGIVFSOuP3kqjBXp
wK3VNao/13Nexkg4I3al8Un1mVgoYNaHliy8/yDHa/mYQzHoSnvgvYBXddbK2tp/
HrFDVLvkutIFKV8RgkSE19iEVKayIyCj3XM0sC6yLOMx7S9YQ3enpQ2oufd6MhVr
WaklkunPAgMBAAECggEABqtA+6dr/m3rcEdMZJ88rrUDPR0l/4DPfn9SP6+2D0Sg
OEQdmgFoB3Rem2QGgGZi9RN5I511Eg0CKKKLtQFz57Ma2f7ka/yWLCr6YIwCfrkI
hherPU/vLdqc9MV70E8XWFQz+0+faJCn0BBjzFO6qSLfgq+5WJq5r9Hg0n0oqS0l
XMbxWg0CPMdcjSg5+bur1U0kvwf0z54zNB6hZWxVrOsS4g+uZTfYX1mcciT1pYTX
FW1/hRIW0fJtTsS4eY72Xgi3OCEi9h6E4NYixFSCUZEd3v74mF7ijsyMqJP1MWmz
ZAvtOLl9dtEkapDKF+6wE/0T8SXGpSVqsf7GSek+MQKBgQDflKukODEzH0sP69Vd
shcdiYPLXCkki2Xl4B2I0G5FDj5jIRbOV7ZuRQnxkTC4NYaNGVKc0hRg6HHNFN29
6hcOZwDt0W1sL3yWK6amkPyBPXDcBl/OZ6UIVvaQx0lcr8R9PAGykaMn3UsugvUO
5r+iDkzNr715RqxcPTLm1EgfKQKBgQDbx47duGwoQKolStIGryzbpwDBpYrv0jDG
p/SY7TL6eHTFdfLhxaQObX9fKlmVNtE5jFRR59Advq60pHJ3q/dmKwb4vRU5HAuF
C4NUSPfOCfPKlcv42LFlXRaFHDOtPfgDVfJSC93l2v8/kNCz3l7YG9tZd/MvSP1A
uQ90U9F4NwKBgQCGfSmaSOrfc411cEkSaVQaQmPy6ecdwnRzCJL7f1U1WNISUw8i
5AQq5ICMvOdvh1L+gSL+jigP+wKpeEnCOZPQ6AjZBUcq8o2gz3UZcNFS9KB02ai7
wgC1uYnroNTyWhB5vKTQw2Y/TpAw1DmQ0yCm3K86cuIol2iKu41o6HzRsQKBgQCX
b1CEe7+imLPkEELZMjjBfLfrtkoeZwEO0Mmb2czHgtpK+LOLV2hsPIyIISEqzGOr
uIKdERJ4fFvawnjQ9p/4OOuL1pVaDXXujXlHSSPeR0NBMqgh5gWNp2+N9lmxJELQ
4Zafa+fQqm43+WuklDNbyw3//sOEsFE4GIuKhvqNTwKBgQDZa4MaUzav6aHNyQ+D
kDxktCDWhf7YGy5+fZ/XTEIpcT+mRqxSobOlRhnk3lt2AjoGS/rP7icdT2bZrKMV
rBDZAUb/MdN/OyjP9NC4tfOm/I5oG/fHwpAf6JfyZ7cmFIDJasb24964yLBUz+R5
7e+voQFkpSpjimx/dkvB6jIBpQ==
-----END PRIVATE KEY-----
$k$),
('small', $k$-----BEGIN RSA PRIVATE KEY-----
MIICXAIBAAKBgQDb7cuNzp0VVR8WV/NyzTUWH51WzJ6VPGzaVgUA5zojbzg1osrf
8ee2ZpcIM1jovThgqNp4HJozBRe88J0UMlQsPJrtpO/bY0Nyfag5ERNHnCTUS+Ok
9AleWhmlou6crXkEaBYqFuDDyTZk+6JZtFzQf5j84rWpeUmYQiEMitUuWQIDAQAB
AoGAUUAk95rhhcQQ3BxaIIuXlTjQ1AR8gf306STmbFMAs56fUZF3Cg1A4a49FhaC
PlnJvkwjikRm43p6Lp9mKNP/LDjdR38tcJdZZ+VEoIg1Uizb9eJjvM5YtXlHCxVq
cLJKjdbJ2G8FgVL62mz8Y0w41oesVbFBvSPcR614iGWfkhECQQD/O5EPm8mV9uPv
9hulbO6TqqhP5L3cRdUE0fEN8kcoSMRXONIkiG1SaULVyPgHMp2yg3gw8FPvBNs1
IOvsRicXAkEA3JcOzTAJzNrhi+n3DUY7kvboSmPSjwOnmA4u2K5H77uP8XyK/Did
Qe7eT7tZuAhgjotqwH6t6m2OYgy2BJy8DwJATw3ZKXd8Ydm90hZti7iI0O4cAdr8
v5xVlY+dVU+EoMKhJc7wr+YdzlfSHruHr1sLIz67XJUjujXL29HdoSo9cwJBAJ51
jNZs2b1kxnzhduz8NLNf1oIJrym48F1UYuaYW2ilDcPlOVnxuVWxp9USumJu8h2z
nN3mojwyswNQKjip9pUCQHPt19fxR6VxTnK+D282LuLWyPQRJspa7TnQnIB+RHE2
SN6x04JYDXvRWQJ0VOIXg1u53YLe3epB13UB/OM6E/c=
-----END RSA PRIVATE KEY-----
$k$),
('ec', $k$-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIL+0dhfHHDDFpeVNMf+0e8IJbeK4wZmzVfGUeVKiu2/ooAoGCCqGSM49
AwEHoUQDQgAEFwt0wYUoqI9oDLK6E47mLp6j+qgStkRMvzZlzz37l5GqHr2jLrKk
u2hCYRFGB25kXkiMdI3JQTDSQ3BakEEaVA==
-----END EC PRIVATE KEY-----
$k$),
('encrypted', $k$-----BEGIN ENCRYPTED PRIVATE KEY-----
MIIFLTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQIdopL3+lMoy8CAggA
MAwGCCqGSIb3DQIJBQAwHQYJYIZIAWUDBAEqBBChv5gVLCJvDAV/DRp6MsOTBIIE
0C7UFLPUlmAK0NivwCT+SKwoKpffAphZKsJs8EPpPMI+wM7G8Ly3glQJKew5Sp0e
ghg6FKtOglmfTrISTbjUPTpqe7DIxp0IuAPNIoioJvjj7yNmNik0PcFjOIJOLvGO
3o+RCG88eH3zRvEhVr9KkWSt9jFdb5+22Y9zyCfYkVYTds5cgwMjiYtz2BHmHphp
sj8sgKzuWH6EWIxriQcYE+xjwnrC7jentv0Kvuq6RT5Uq/61rTseVbC7TBOZIMDq
pVn+PVbsDuAIaeF3l9kI+8uQUuye6kmn15eEozkqGCGBl46CDQK4RWUP3xDvYLkf
ed9/W8gk99GByGJpvduHYq27ZFPDyvFR/t8BM3cM1Km5LCFKQMjbaPjKbyHDxwkp
3L8eVd/FDRVym7c+hzFTunKAjmW6TDSh9NkOACDFagh+JT+HJLcyHf2cTr/7DWBN
OflsoenUmh0s6D9suJRe/m4/YgPcenn1Hx5RZU+Wb0kBPk2uyqnBYyLKmbnn0O22
Tsm4H+3920RoYiQ9hpHZS66sqX3hfE9If8v2hEQBQVglVKbyLVvEtkuNaJU8UjlQ
DP9nS7wTR9ipdQAwt8k7vWDpDLBNXuvMTaG0nW7iKMz/r+ZS4KNzKUiAKcp6CPpw
OOQ099uzzy7Vzh4qXHv7/Q4FL0aX3aF/kIaFlUrLiaKHoAgY6Kq8fiJF5TPTipXJ
25JhtTtRfRHeJM6exfbD1QAAdJBGwOfYOPvyj/O7tlDUq9Q5oWu8YNnFAvoERniZ
5aaFfyoNmV4qzwleHGPmbJMIqGVy0XNRZstWpT/YxnSeVnVf7Y5rdEXeOKP35+Vr
1ABl0GPVxBLDyYi7iQQl8H6MaMLLiCIIOuRYhp9v14PbedzMhrmrB61qkT9uuIVV
LZAR4jdViqjXpdbWXzQuTcAs4IaSlg5ehTa8d6h5iIN0XAx3cqVuPKckIqaaKFd3
jMQhCS6DSxCWHQP+5EuO4u2fl9UyighghpvREcYJrpr4yOyIS4t6no+hRxZulQAL
YTiFBZV+vVWn7TYMJV4wM8oTGr5mCYLVnpHuThqC2Ysr76gQP2Q+iP/evSSjVZue
u/4CbwR1oTj+B+D4lI3ZtZmjjZBuqqRAxHFpKSciPMu0COpSGKcq1EGYU/iQZubb
ZWSsj4J8lgiZolQ+EkUUge0F9LH5g2LToEB7Ozj6XekizMiFdV9loWxqhgj7fUXN
AlM7ANc1Udh9oGQ7MxTIiVsDnDSRvkOtzwW5gvgZ7Cy9iJ4wtVjGzUQdqOPmTIrH
P9xZrt2l0m2PLxmuSlFhiw54uY1dgJ0iB0S1Qh/UaPUbd3wdLn+z+ioaOS62UBeN
u++8ppNjdzDOGS43sj7MnJwgXzxEu+jXYjdPCjLN3haXjPBNVxv00SdeJEfTPKxB
EJPAbKu5oUIc99dDSIH2Jawafbww9ioHRawi0MjsrVVja4eBcUR8faWZLAcxSb6u
ZUlz5cegwbaUYn7+2KMAlaCeuDSArQU7OPPBEgYUpCN6uX1lIlNCk5cDlzPFqmNc
54Wc4BviDl8KtGq/+DMIXwPZSLL4LADJQWQVVA0b46aN0njM6fGZ3iMgbRHj11kN
DMAFqKTq9V/X4KnLMfoYChjFi/czNgvZg99ce/VAMGL0
-----END ENCRYPTED PRIVATE KEY-----
$k$);

-- without a key file nothing is stored
SHOW webhook_inbox.key_file;
SELECT wi_cred_try($$SELECT webhook_inbox._seal('x', 'c')$$) AS unset;
SET webhook_inbox.key_file = 'wi_regress_missing.key';
SELECT wi_cred_try($$SELECT webhook_inbox._seal('x', 'c')$$) AS missing;
SET webhook_inbox.key_file = 'wi_regress_short.key';
SELECT wi_cred_try($$SELECT webhook_inbox._seal('x', 'c')$$) AS short;
COPY (SELECT 1) TO PROGRAM 'umask 077 && cat > /dev/null && printf %s 0123456789abcdef0123456789abcdef > wi_regress_hex128.key';
SET webhook_inbox.key_file = 'wi_regress_hex128.key';
SELECT wi_cred_try($$SELECT webhook_inbox._seal('x', 'c')$$) AS hex_128_bits;
SET webhook_inbox.key_file = 'wi_regress_nothex.key';
SELECT wi_cred_try($$SELECT webhook_inbox._seal('x', 'c')$$) AS not_hex;
SET webhook_inbox.key_file = 'wi_regress_open.key';
SELECT wi_cred_try($$SELECT webhook_inbox._seal('x', 'c')$$) AS world_readable;
SET webhook_inbox.key_file = '.';
SELECT wi_cred_try($$SELECT webhook_inbox._seal('x', 'c')$$) AS a_directory;

-- sealing: ciphertext only, bound to its context, fresh nonce each time
SET webhook_inbox.key_file = 'wi_regress_a.key';
SELECT octet_length(webhook_inbox._seal('ghs_secret', 'ctx')) AS sealed_bytes,
	   position('ghs_secret'::bytea IN webhook_inbox._seal('ghs_secret', 'ctx')) AS plaintext_at,
	   get_byte(webhook_inbox._seal('ghs_secret', 'ctx'), 0) AS version,
	   webhook_inbox._seal('ghs_secret', 'ctx') <> webhook_inbox._seal('ghs_secret', 'ctx') AS fresh_nonce;
SELECT webhook_inbox._unseal(webhook_inbox._seal('ghs_secret', 'ctx'), 'ctx') AS round_trip;
SELECT wi_cred_try($$SELECT webhook_inbox._unseal(webhook_inbox._seal('ghs_secret', 'ctx'), 'other ctx')$$) AS other_context;
-- one bit of the tag flipped (setting the byte to a value could leave it as it was, once in 256)
SELECT wi_cred_try($$SELECT webhook_inbox._unseal(set_byte(v, 25, get_byte(v, 25) # 1), 'ctx')
	FROM (SELECT webhook_inbox._seal('ghs_secret', 'ctx') AS v) x$$) AS altered;
SELECT wi_cred_try($$SELECT webhook_inbox._unseal('\x0102'::bytea, 'ctx')$$) AS not_sealed;
CREATE TEMP TABLE sealed AS SELECT webhook_inbox._seal('ghs_secret', 'ctx') AS v;
SET webhook_inbox.key_file = 'wi_regress_b.key';
SELECT wi_cred_try($$SELECT webhook_inbox._unseal(v, 'ctx') FROM sealed$$) AS another_key;
SET webhook_inbox.key_file = 'wi_regress_a.key';
SELECT webhook_inbox._unseal(v, 'ctx') AS the_right_key_again FROM sealed;

SELECT webhook_inbox.create_source('cred_gh', 'github', 'gh_c', api_base => 'http://127.0.0.1:1') IS NOT NULL AS created;
SELECT webhook_inbox.create_source('cred_gh_nobase', 'github', 'gh_c') IS NOT NULL AS created;
SELECT webhook_inbox.create_source('cred_shop', 'shopify', 'shpss_c', api_base => 'http://127.0.0.1:1') IS NOT NULL AS created;
SELECT webhook_inbox.create_source('cred_stripe', 'stripe', 'whsec_c', api_base => 'http://127.0.0.1:1') IS NOT NULL AS created;

-- a GitHub App's key: every refusal
SELECT wi_cred_try($$SELECT webhook_inbox.set_github_app('nosuch', '12345', (SELECT pem FROM pem WHERE name = 'pkcs1'))$$) AS unknown_source;
SELECT wi_cred_try($$SELECT webhook_inbox.set_github_app('cred_stripe', '12345', (SELECT pem FROM pem WHERE name = 'pkcs1'))$$) AS not_github;
SELECT wi_cred_try($$SELECT webhook_inbox.set_github_app('cred_gh_nobase', '12345', (SELECT pem FROM pem WHERE name = 'pkcs1'))$$) AS no_api_base;
SELECT wi_cred_try($$SELECT webhook_inbox.set_github_app('cred_gh', 'app-1', (SELECT pem FROM pem WHERE name = 'pkcs1'))$$) AS bad_app_id;
SELECT wi_cred_try($$SELECT webhook_inbox.set_github_app('cred_gh', '012', (SELECT pem FROM pem WHERE name = 'pkcs1'))$$) AS leading_zero;
SELECT wi_cred_try($$SELECT webhook_inbox.set_github_app('cred_gh', '12345', (SELECT pem FROM pem WHERE name = 'pkcs1'), 'Iv1 space')$$) AS bad_client_id;
SELECT wi_cred_try($$SELECT webhook_inbox.set_github_app('cred_gh', '12345', NULL)$$) AS null_key;
SELECT wi_cred_try($$SELECT webhook_inbox.set_github_app('cred_gh', '12345', 'ghp_not_a_key')$$) AS not_pem;
SELECT wi_cred_try($$SELECT webhook_inbox.set_github_app('cred_gh', '12345', E'-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n')$$) AS garbled;
SELECT wi_cred_try($$SELECT webhook_inbox.set_github_app('cred_gh', '12345', (SELECT pem FROM pem WHERE name = 'ec'))$$) AS ec_key;
SELECT wi_cred_try($$SELECT webhook_inbox.set_github_app('cred_gh', '12345', (SELECT pem FROM pem WHERE name = 'small'))$$) AS rsa_1024;
SELECT wi_cred_try($$SELECT webhook_inbox.set_github_app('cred_gh', '12345', (SELECT pem FROM pem WHERE name = 'encrypted'))$$) AS encrypted;
SELECT wi_cred_try($$SELECT webhook_inbox._github_app_jwt('cred_gh')$$) AS jwt_before_a_key;
SELECT wi_cred_try($$SELECT webhook_inbox._github_app_jwt('nosuch')$$) AS jwt_unknown_source;

-- PKCS#1 (GitHub's download) and PKCS#8 are both accepted; stored encrypted
SELECT webhook_inbox.set_github_app('cred_gh', '12345', (SELECT pem FROM pem WHERE name = 'pkcs1'));
SELECT settings FROM webhook_inbox.sources WHERE name = 'cred_gh';
SELECT c.tenant, c.kind, c.status, position('PRIVATE KEY'::bytea IN c.secret) AS plaintext_at,
	   octet_length(c.secret) - octet_length((SELECT pem FROM pem WHERE name = 'pkcs1')) AS overhead
  FROM webhook_inbox.tenant_credentials c JOIN webhook_inbox.sources s ON s.id = c.source_id
 WHERE s.name = 'cred_gh';
CREATE TEMP TABLE old_secret AS
SELECT c.secret FROM webhook_inbox.tenant_credentials c JOIN webhook_inbox.sources s ON s.id = c.source_id
 WHERE s.name = 'cred_gh';
SELECT webhook_inbox.set_github_app('cred_gh', '12345', (SELECT pem FROM pem WHERE name = 'pkcs8'), 'Iv23liTestClient');
SELECT settings FROM webhook_inbox.sources WHERE name = 'cred_gh';
SELECT c.secret <> o.secret AS rotated,
	   webhook_inbox._unseal(c.secret, webhook_inbox._credential_context(c.source_id, '', 'secret'))
		 = (SELECT pem FROM pem WHERE name = 'pkcs8') AS is_the_pkcs8_key
  FROM webhook_inbox.tenant_credentials c JOIN webhook_inbox.sources s ON s.id = c.source_id, old_secret o
 WHERE s.name = 'cred_gh';

-- the JWT: header, claims and a 2048-bit signature, base64url without padding
CREATE FUNCTION wi_b64url(s text) RETURNS bytea LANGUAGE sql AS $$
	SELECT decode(rpad(translate(s, '-_', '+/'), (octet_length(s) + 3) / 4 * 4, '='), 'base64')
$$;
CREATE TEMP TABLE jwt AS SELECT webhook_inbox._github_app_jwt('cred_gh') AS t, extract(epoch FROM now())::bigint AS at;
SELECT convert_from(wi_b64url(split_part(t, '.', 1)), 'UTF8') AS header FROM jwt;
SELECT c ->> 'iss' AS iss, (c ->> 'exp')::bigint - (c ->> 'iat')::bigint AS exp_minus_iat,
	   (c ->> 'iat')::bigint - at BETWEEN -62 AND -58 AS iat_a_minute_ago,
	   (c ->> 'exp')::bigint - at BETWEEN 538 AND 542 AS exp_nine_minutes_ahead,
	   (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys(c) k) AS claims
  FROM (SELECT convert_from(wi_b64url(split_part(t, '.', 2)), 'UTF8')::jsonb AS c, at FROM jwt) x;
SELECT octet_length(wi_b64url(split_part(t, '.', 3))) AS signature_bytes,
	   t ~ '^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$' AS base64url_unpadded
  FROM jwt;

-- a tenant's credentials: every refusal
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('nosuch', 'a.myshopify.com', 'shopify_shop', 'shpat_1')$$) AS unknown_source;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_shop', '', 'shopify_shop', 'shpat_1')$$) AS empty_tenant;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_shop', repeat('a', 256), 'api_token', 'shpat_1')$$) AS long_tenant;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_shop', E'a\nb', 'api_token', 'shpat_1')$$) AS control_characters;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_shop', 'a.myshopify.com', 'password', 'shpat_1')$$) AS unknown_kind;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_gh', '101', 'github_app_installation', 'ghs_1')$$) AS installation_token;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_stripe', 'a.myshopify.com', 'shopify_shop', 'shpat_1')$$) AS shop_on_stripe;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_shop', 'acme.example.com', 'shopify_shop', 'shpat_1')$$) AS not_a_shop_domain;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_gh', '101', 'api_token', 'ghp_1')$$) AS on_a_github_app;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_shop', 'a.myshopify.com', 'shopify_shop', '')$$) AS empty_secret;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_shop', 'a.myshopify.com', 'shopify_shop', E'shpat_1\r\nX-Evil: 1')$$) AS header_injection;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_shop', 'a.myshopify.com', 'shopify_shop', 'shpat_1', refresh_token => 'has space')$$) AS bad_refresh_token;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_shop', 'a.myshopify.com', 'shopify_shop', 'shpat_1', now() - interval '1 second')$$) AS expired_already;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_shop', 'a.myshopify.com', 'shopify_shop', 'shpat_1', refresh_expires_at => now() + interval '1 day')$$) AS refresh_expiry_alone;

-- add, read, rotate
SELECT webhook_inbox.set_tenant_credentials('cred_shop', 'a.myshopify.com', 'shopify_shop', 'shpat_one',
	now() + interval '1 hour', 'shprt_one', now() + interval '90 days');
SELECT webhook_inbox.set_tenant_credentials('cred_stripe', 'acct_1', 'api_token', 'rk_live_one');
SELECT source, tenant, kind, has_secret, expires_at > now() AS expires_later, has_refresh_token, status, owner
  FROM webhook_inbox.tenant_credentials_status WHERE source LIKE 'cred_%' ORDER BY 1, 2;
SELECT position('shpat_one'::bytea IN c.secret) AS token_at, position('shprt_one'::bytea IN c.refresh_secret) AS refresh_at
  FROM webhook_inbox.tenant_credentials c WHERE c.tenant = 'a.myshopify.com';
SELECT s.name, a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'a.myshopify.com') a WHERE s.name = 'cred_shop';
SELECT s.name, a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'acct_1') a WHERE s.name = 'cred_stripe';
SELECT s.name, a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'b.myshopify.com') a WHERE s.name = 'cred_shop';
SELECT s.name, a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, '') a WHERE s.name = 'cred_shop';
SELECT webhook_inbox.set_tenant_credentials('cred_shop', 'a.myshopify.com', 'shopify_shop', 'shpat_two');
SELECT s.name, a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'a.myshopify.com') a WHERE s.name = 'cred_shop';
UPDATE webhook_inbox.tenant_credentials SET expires_at = now() - interval '1 second' WHERE tenant = 'a.myshopify.com';
SELECT a.status, a.header, left(a.reason, 49) AS reason
  FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'a.myshopify.com') a WHERE s.name = 'cred_shop';
SELECT webhook_inbox.set_tenant_credentials('cred_shop', 'a.myshopify.com', 'shopify_shop', 'shpat_three');

-- disable, enable, remove
SELECT wi_cred_try($$SELECT webhook_inbox.disable_tenant('cred_shop', 'a.myshopify.com', ' ')$$) AS no_reason;
SELECT wi_cred_try($$SELECT webhook_inbox.disable_tenant('cred_shop', 'b.myshopify.com', 'churned')$$) AS unknown_tenant;
SELECT wi_cred_try($$SELECT webhook_inbox.disable_tenant('nosuch', 'b.myshopify.com', 'churned')$$) AS unknown_source;
SELECT webhook_inbox.disable_tenant('cred_shop', 'a.myshopify.com', 'app/uninstalled');
SELECT source, tenant, status, status_reason, owner FROM webhook_inbox.tenant_credentials_status WHERE tenant = 'a.myshopify.com';
SELECT s.name, a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'a.myshopify.com') a WHERE s.name = 'cred_shop';
SELECT webhook_inbox.enable_tenant('cred_shop', 'a.myshopify.com');
SELECT s.name, a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'a.myshopify.com') a WHERE s.name = 'cred_shop';
SELECT wi_cred_try($$SELECT webhook_inbox.enable_tenant('cred_shop', 'b.myshopify.com')$$) AS enable_unknown;
SELECT webhook_inbox.disable_tenant('cred_shop', 'a.myshopify.com', 'paused');
SELECT webhook_inbox.set_tenant_credentials('cred_shop', 'a.myshopify.com', 'shopify_shop', 'shpat_four');
SELECT tenant, status, status_reason FROM webhook_inbox.tenant_credentials_status WHERE tenant = 'a.myshopify.com';
-- a 401: with a token already replaced, the new one; with the current one, the shop is flagged
SELECT a.* FROM webhook_inbox.sources s,
	webhook_inbox._tenant_reauth(s.id, 'a.myshopify.com', 'X-Shopify-Access-Token: shpat_three') a WHERE s.name = 'cred_shop';
SELECT a.* FROM webhook_inbox.sources s,
	webhook_inbox._tenant_reauth(s.id, 'a.myshopify.com', 'X-Shopify-Access-Token: shpat_four') a WHERE s.name = 'cred_shop';
SELECT a.* FROM webhook_inbox.sources s,
	webhook_inbox._tenant_reauth(s.id, 'b.myshopify.com', 'X-Shopify-Access-Token: shpat_x') a WHERE s.name = 'cred_shop';
SELECT tenant, status, status_reason, owner FROM webhook_inbox.tenant_credentials_status WHERE tenant = 'a.myshopify.com';
SELECT wi_cred_try($$SELECT webhook_inbox.remove_tenant_credentials('cred_shop', 'b.myshopify.com')$$) AS remove_unknown;
SELECT webhook_inbox.remove_tenant_credentials('cred_shop', 'a.myshopify.com');
SELECT s.name, a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'a.myshopify.com') a WHERE s.name = 'cred_shop';

-- a GitHub App's installations: disabled without a token, flagged, the app's key disabled
SELECT wi_cred_try($$SELECT webhook_inbox.disable_tenant('cred_gh', 'org-1', 'x')$$) AS not_an_installation_id;
SELECT webhook_inbox.disable_tenant('cred_gh', '101', 'billing dispute');
SELECT source, tenant, kind, has_secret, status, status_reason, owner FROM webhook_inbox.tenant_credentials_status
 WHERE source = 'cred_gh' ORDER BY tenant;
SELECT a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, '101') a WHERE s.name = 'cred_gh';
SELECT a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'acme') a WHERE s.name = 'cred_gh';
SELECT a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, '') a WHERE s.name = 'cred_gh';
SELECT webhook_inbox.enable_tenant('cred_gh', '101');
-- the token endpoint is unreachable here (port 1): the read waits, nothing is flagged
SELECT a.status, a.header, left(a.reason, 58) AS reason
  FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, '101') a WHERE s.name = 'cred_gh';
SELECT tenant, status FROM webhook_inbox.tenant_credentials_status WHERE source = 'cred_gh' ORDER BY tenant;
-- GitHub's answers, as the worker keeps them
SELECT a.* FROM webhook_inbox.sources s,
	webhook_inbox._tenant_token_answer(s.id, '102', 201, '{"token":"ghs_abc","expires_at":"2999-01-01T00:00:00Z"}') a
 WHERE s.name = 'cred_gh';
SELECT a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, '102') a WHERE s.name = 'cred_gh';
SELECT a.* FROM webhook_inbox.sources s,
	webhook_inbox._tenant_token_answer(s.id, '103', 201, '{"token":"ghs\r\nX: 1","expires_at":"2999-01-01T00:00:00Z"}') a
 WHERE s.name = 'cred_gh';
SELECT a.* FROM webhook_inbox.sources s,
	webhook_inbox._tenant_token_answer(s.id, '103', 403, '{"message":"This installation has been suspended","documentation_url":"https://docs.github.com/rest"}') a
 WHERE s.name = 'cred_gh';
SELECT a.* FROM webhook_inbox.sources s,
	webhook_inbox._tenant_token_answer(s.id, '102', 404, '{"message":"Not Found"}') a
 WHERE s.name = 'cred_gh';
SELECT a.* FROM webhook_inbox.sources s,
	webhook_inbox._tenant_token_answer(s.id, '104', 502, 'Bad Gateway') a
 WHERE s.name = 'cred_gh';
SELECT tenant, kind, has_secret, status, status_reason, owner FROM webhook_inbox.tenant_credentials_status
 WHERE source = 'cred_gh' ORDER BY tenant;
SELECT a.* FROM webhook_inbox.sources s,
	webhook_inbox._tenant_token_answer(s.id, '105', 401, '{"message":"A JSON web token could not be decoded"}') a
 WHERE s.name = 'cred_gh';
SELECT a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, '106') a WHERE s.name = 'cred_gh';
-- a new key clears the app's refusal, not the installations' own
SELECT webhook_inbox.set_github_app('cred_gh', '12345', (SELECT pem FROM pem WHERE name = 'pkcs1'), 'Iv23liTestClient');
SELECT tenant, status FROM webhook_inbox.tenant_credentials_status WHERE source = 'cred_gh' ORDER BY tenant;

-- the roles: no secret for readers or operators, the status for both
SET ROLE webhook_inbox_reader;
SELECT wi_cred_try($$SELECT secret FROM webhook_inbox.tenant_credentials$$) AS reader_table;
SELECT wi_cred_try($$SELECT webhook_inbox._unseal('\x00'::bytea, 'x')$$) AS reader_unseal;
SELECT wi_cred_try($$SELECT webhook_inbox._tenant_auth(1, '101')$$) AS reader_auth;
SELECT wi_cred_try($$SELECT webhook_inbox._github_app_jwt('cred_gh')$$) AS reader_jwt;
SELECT count(*) > 0 AS reader_sees_status FROM webhook_inbox.tenant_credentials_status;
RESET ROLE;
SET ROLE webhook_inbox_operator;
SELECT wi_cred_try($$SELECT secret FROM webhook_inbox.tenant_credentials$$) AS operator_table;
SELECT wi_cred_try($$SELECT webhook_inbox.set_tenant_credentials('cred_stripe', 'acct_2', 'api_token', 'rk_2')$$) AS operator_sets;
RESET ROLE;
SELECT x.extcondition[array_position(x.extconfig, 'webhook_inbox.tenant_credentials'::regclass::oid)] AS dumped
  FROM pg_extension x WHERE x.extname = 'webhook_inbox';

-- a new key: re-encrypt with the old one, then only the new one reads
SELECT count(*) AS secrets, count(*) FILTER (WHERE key_id = webhook_inbox._key_id('wi_regress_a.key')) AS under_a
  FROM webhook_inbox.tenant_credentials_status WHERE has_secret;
SET webhook_inbox.key_file = 'wi_regress_b.key';
SELECT wi_cred_try($$SELECT webhook_inbox.reencrypt_credentials(NULL)$$) AS no_old_key;
SELECT wi_cred_try($$SELECT webhook_inbox.reencrypt_credentials('wi_regress_missing.key')$$) AS missing_old_key;
SELECT wi_cred_try($$SELECT webhook_inbox.reencrypt_credentials('wi_regress_b.key')$$) AS the_new_key_as_old;
SELECT webhook_inbox.reencrypt_credentials('wi_regress_a.key') AS reencrypted;
SELECT webhook_inbox.reencrypt_credentials('wi_regress_a.key') AS again;
SELECT count(*) AS secrets, count(*) FILTER (WHERE key_id = webhook_inbox._key_id('wi_regress_b.key')) AS under_b
  FROM webhook_inbox.tenant_credentials_status WHERE has_secret;
SELECT a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'acct_1') a WHERE s.name = 'cred_stripe';
-- unreadable credentials are that tenant's wait (and a WARNING, not shown here: it names the source id)
SET webhook_inbox.key_file = 'wi_regress_a.key';
SET client_min_messages = error;
SELECT a.status, a.header, regexp_replace(a.reason, 'tenant_credentials\(\d+,', 'tenant_credentials(N,') AS reason
  FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'acct_1') a WHERE s.name = 'cred_stripe';
SET client_min_messages = warning;
SET webhook_inbox.key_file = 'wi_regress_b.key';

-- a sealed value moved to another row does not decrypt there
UPDATE webhook_inbox.tenant_credentials c SET secret = (SELECT secret FROM webhook_inbox.tenant_credentials WHERE tenant = '')
  FROM webhook_inbox.sources s WHERE s.id = c.source_id AND s.name = 'cred_stripe' AND c.tenant = 'acct_1';
SET client_min_messages = error;
SELECT a.status, a.header, regexp_replace(a.reason, 'tenant_credentials\(\d+,', 'tenant_credentials(N,') AS reason
  FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'acct_1') a WHERE s.name = 'cred_stripe';
SET client_min_messages = warning;
-- the same for a missing key file
SET webhook_inbox.key_file = 'wi_regress_missing.key';
SET client_min_messages = error;
SELECT a.status, a.header, a.reason
  FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, 'acct_1') a WHERE s.name = 'cred_stripe';
SET client_min_messages = warning;
SET webhook_inbox.key_file = 'wi_regress_b.key';

-- removing the app's key makes the source a plain github source again
SELECT webhook_inbox.remove_tenant_credentials('cred_gh', '');
SELECT settings FROM webhook_inbox.sources WHERE name = 'cred_gh';
SELECT count(*) AS rows_left FROM webhook_inbox.tenant_credentials_status WHERE source = 'cred_gh';
SELECT wi_cred_try($$SELECT webhook_inbox._github_app_jwt('cred_gh')$$) AS jwt_after_removal;
SELECT a.* FROM webhook_inbox.sources s, webhook_inbox._tenant_auth(s.id, '') a WHERE s.name = 'cred_gh';
-- a source's credentials go with it
SELECT webhook_inbox.set_tenant_credentials('cred_stripe', 'acct_1', 'api_token', 'rk_live_again');
DELETE FROM webhook_inbox.sources WHERE name = 'cred_stripe';
SELECT count(*) AS stripe_rows FROM webhook_inbox.tenant_credentials_status WHERE source = 'cred_stripe';
