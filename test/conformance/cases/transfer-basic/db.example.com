$ORIGIN example.com.
$TTL 3600
@ IN SOA ns1.example.com. admin.example.com. 2024010101 7200 3600 1209600 3600
@ IN NS ns1
ns1 IN A 192.0.2.1
www IN A 192.0.2.10
www IN AAAA 2001:db8::10
mail IN MX 10 mx.example.com.
mx IN A 192.0.2.20
sub IN NS ns.sub
ns.sub IN A 192.0.2.30
txt IN TXT "hello world"
