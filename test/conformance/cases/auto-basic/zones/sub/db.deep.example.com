$TTL 300
@ IN SOA ns1.deep.example.com. hostmaster.deep.example.com. 3 7200 3600 1209600 3600
@ IN NS ns1
ns1 IN A 192.0.2.53
host IN A 198.51.100.1
