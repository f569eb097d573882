-- Intake reads a body into its payload with json_fast.c, and hands what
-- that reader does not take (errors, \u escapes, control characters,
-- deep nesting, numbers beyond numeric's limits) to PostgreSQL's parser.
-- Either way the stored payload is jsonb_in's value of the same text:
-- same keys in the same order (the last of equal keys wins), same
-- numbers to the digit, same strings.  Hand-picked shapes first, then
-- 3,000 generated documents.
SET client_min_messages = warning;
SELECT webhook_inbox.create_source('pp', 'stripe', 'whsec_pp') > 0 AS created;

CREATE TEMP TABLE pp_bodies (n int, body text);
INSERT INTO pp_bodies VALUES
	(1, '{"id":"evt_pp1","type":"t","b":1,"a":2,"aa":3,"a":4}'),
	(2, '  {  "id" : "evt_pp2" ,"type":"t", "x" : [ 1 , 2.50 , -0 , -0.0 , 1e3 , 1E-3 , 12.5e+2 , 0.000 ] }  '),
	(3, E'{"id":"evt_pp3","type":"t","s":"tab\\tnl\\nq\\"bs\\\\sl\\/b\\bf\\fr\\r"}'),
	(4, '{"id":"evt_pp4","type":"t","u":"é€😀 raw","kéy":"v","ключ":"значение"}'),
	(5, '{"id":"evt_pp5","type":"t","esc":"caf\u00e9 \ud83d\ude00 \u0041"}'),
	(6, '{"id":"evt_pp6","type":"t","t":true,"f":false,"n":null,"e":{},"ea":[],"ee":[{},[[]]]}'),
	(7, '[1,"two",{"three":3,"three":"3"},[4,[5,[6]]]]'),
	(8, '"a raw string"'),
	(9, '-12.340e-5'),
	(10, 'true'),
	(11, 'null'),
	(12, E'\r\n\t{"id":"evt_pp12","type":"t"}\r\n'),
	(13, '{"id":"evt_pp13","type":"t","big":123456789012345678901234567890.123456789012345678901234567890}'),
	(14, '{"id":"evt_pp14","type":"t","":"empty key","zz":{"":{"":""}}}'),
	(15, '{"id":"evt_pp15","type":"t","dup":{"a":1},"dup":{"b":2},"dup":{"c":3}}'),
	(16, '{"id":"evt_pp16","type":"t","keys":{"bb":1,"a":2,"ccc":3,"b":4,"aaa":5,"c":6,"ab":7,"ba":8,"abc":9,"x":10,"y":11,"z":12,"w":13,"v":14,"u":15}}'),
	(17, '{"id":"evt_pp17","type":"t","slash":"a\/b","sol":"\\\/"}'),
	(18, '{"id":"evt_pp18","type":"t","deep":' || repeat('[', 400) || repeat(']', 400) || '}'),
	(19, '{"id":"evt_pp19","type":"t","n":' || repeat('9', 5000) || '}'),
	(20, '{"id":"evt_pp20","type":"t","ctl":"' || chr(127) || '"}'),
	(21, '{"id":"evt_pp21","type":"t","ints":[0,-0,7,-7,10,100,1000,10000,100000,123456789012345678,-123456789012345678,1234567890123456789,999999999999999999,-99999999999999999,9223372036854775807,-9223372036854775808,100000000000000000]}');

-- generated: objects of random keys (some repeated), values of every kind,
-- numbers in every notation, strings with and without escapes, and random
-- white space between the tokens
CREATE FUNCTION pp_ws(seed int) RETURNS text LANGUAGE sql AS $$
	SELECT (ARRAY['', '', ' ', E'\n', E'\t ', E' \r\n '])[1 + abs(hashint4(seed)) % 6] $$;
CREATE FUNCTION pp_scalar(seed int) RETURNS text LANGUAGE sql AS $$
	SELECT CASE abs(hashint4(seed)) % 12
		WHEN 0 THEN 'true' WHEN 1 THEN 'false' WHEN 2 THEN 'null'
		WHEN 3 THEN (hashint4(seed + 1) % 100000)::text
		WHEN 4 THEN ((hashint4(seed + 2) % 1000000)::numeric / 1000)::text
		WHEN 5 THEN (abs(hashint4(seed + 3)) % 1000)::text || 'e' || (hashint4(seed + 4) % 40)::text
		WHEN 6 THEN '-0.' || lpad((abs(hashint4(seed + 5)) % 1000)::text, 5, '0') || 'E+2'
		WHEN 7 THEN '"plain ' || md5(seed::text) || '"'
		WHEN 8 THEN E'"esc \\n\\t\\"\\\\\\/ ' || left(md5(seed::text), 5) || '"'
		WHEN 9 THEN '"utf8 é ü ✓ 😀 ' || left(md5(seed::text), 3) || '"'
		WHEN 10 THEN E'"\\u00e9\\u0022 ' || left(md5(seed::text), 4) || '"'
		ELSE '""' END $$;
CREATE FUNCTION pp_value(seed int, depth int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	k int := abs(hashint4(seed * 7 + depth)) % 5;
	n int := abs(hashint4(seed * 13 + depth)) % 7;
	parts text[] := '{}';
BEGIN
	IF depth >= 4 OR k = 0 THEN
		RETURN pp_scalar(seed);
	END IF;
	FOR i IN 1 .. n LOOP
		parts := parts || ((CASE WHEN k = 1 THEN ''
			ELSE '"' || (ARRAY['id', 'a', 'bb', 'object', 'data', 'a', 'ccc', 'é', 'k' || (seed % 5)])[1 + abs(hashint4(seed + i)) % 9]
				|| '"' || pp_ws(seed + i) || ':' || pp_ws(seed - i) END)
			|| pp_value((seed % 1000000) * 31 + i, depth + 1) || pp_ws(seed % 1000000 * 3 + i));
	END LOOP;
	RETURN CASE WHEN k = 1 THEN '[' || pp_ws(seed) || array_to_string(parts, ',') || ']'
		ELSE '{' || pp_ws(seed) || array_to_string(parts, ',' || pp_ws(seed + 1)) || '}' END;
END $$;
INSERT INTO pp_bodies
SELECT 100 + g, '{"id":"evt_gen' || g || '","type":"t","v":' || pp_value(g, 0) || ',"w":' || pp_value(g + 50000, 1) || '}'
  FROM generate_series(1, 3000) g;

SELECT count(*) FILTER (WHERE webhook_inbox.intake('pp', '{}', convert_to(body, 'UTF8')) IS NOT NULL) AS taken
  FROM pp_bodies;

-- every body's payload is jsonb_in's value of its text, to the byte
SELECT count(*) AS compared,
	   count(*) FILTER (WHERE i.payload IS NULL) AS unparsed,
	   count(*) FILTER (WHERE i.payload::text IS DISTINCT FROM b.body::jsonb::text) AS different
  FROM pp_bodies b
  JOIN webhook_inbox.inbox i ON i.body_sha256 = sha256(convert_to(b.body, 'UTF8'))
 WHERE i.source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'pp');
-- and to the byte: equal text is equal jsonb but for numbers (a zero's
-- sign, say), so each number's binary form (its digits, weight, sign and
-- scale) is compared too, in document order
SELECT sum((SELECT count(*) FROM jsonb_path_query(i.payload, 'lax $.** ? (@.type() == "number")') v)) > 3000 AS many_numbers,
	   count(*) FILTER (WHERE (SELECT array_agg(numeric_send(v::numeric))
								 FROM jsonb_path_query(i.payload, 'lax $.** ? (@.type() == "number")') v)
						  IS DISTINCT FROM
						  (SELECT array_agg(numeric_send(v::numeric))
							 FROM jsonb_path_query(b.body::jsonb, 'lax $.** ? (@.type() == "number")') v))
		 AS other_numbers
  FROM pp_bodies b
  JOIN webhook_inbox.inbox i ON i.body_sha256 = sha256(convert_to(b.body, 'UTF8'))
 WHERE i.source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'pp');
SELECT b.n, left(i.payload::text, 120) AS payload
  FROM pp_bodies b
  JOIN webhook_inbox.inbox i ON i.body_sha256 = sha256(convert_to(b.body, 'UTF8'))
 WHERE i.source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'pp')
   AND b.n < 100 AND b.n NOT IN (18, 19)
 ORDER BY b.n;
-- the generated ones cover what they are meant to
SELECT count(*) FILTER (WHERE body ~ '\\u') > 100 AS with_u_escapes,
	   count(*) FILTER (WHERE body ~ '\\[nt"]') > 100 AS with_escapes,
	   count(*) FILTER (WHERE body ~ '[eE][-+]?[0-9]') > 100 AS with_exponents,
	   count(*) FILTER (WHERE body ~ E'[\\n\\t]') > 100 AS with_white_space
  FROM pp_bodies WHERE n >= 100;
-- a body that is not JSON is quarantined with the parser's reason, as before
SELECT webhook_inbox.intake('pp', '{}', convert_to(b, 'UTF8')) AS outcome
  FROM unnest(ARRAY['{"id":"evt_bad1","type":"t","x":[1,]}', '{"id":"evt_bad2","type":"t","x":01}',
	'{"id":"evt_bad3","type":"t","x":"a' || chr(9) || 'b"}', '{"id":"evt_bad4","type":"t","x":tru}',
	'{"id":"evt_bad5","type":"t","x":"\u0000"}', '{"id":"evt_bad6","type":"t"} x',
	'{"id":"evt_bad7","type":"t","x":1.}', '{"id":"evt_bad8","type":"t","x":"\x"}']) b;
SELECT reason FROM webhook_inbox.inbox
 WHERE source_id = (SELECT id FROM webhook_inbox.sources WHERE name = 'pp') AND status = 'quarantined'
   AND reason LIKE 'invalid_json%'
 ORDER BY received_at, id;
DROP FUNCTION pp_value(int, int);
DROP FUNCTION pp_scalar(int);
DROP FUNCTION pp_ws(int);
