#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv22779<HOST>
h=$1; shift
exec ip netns exec "knv22779$h" sh -c "$*"
