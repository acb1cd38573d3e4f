#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv10185<HOST>
h=$1; shift
exec ip netns exec "knv10185$h" sh -c "$*"
