"""etcd I/O: the v3 API's messages, the transports that carry them (HTTP/JSON or gRPC), and one
call's connection (time budget, fail-over, parallel reads); what a process keeps from call to
call (auth tokens, TLS contexts). Keys are bytes here; nothing in this folder knows what an
event is."""
