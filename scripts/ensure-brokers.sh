#!/usr/bin/env bash
# Make sure the brokers the messaging tests use are installed and accepting
# connections: RabbitMQ (127.0.0.1:5672, guest/guest) and NATS with JetStream
# (127.0.0.1:4222), both from Debian's packages.
set -euo pipefail

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_for() {
  local port=$1 name=$2
  for _ in $(seq 1 120); do listening "$port" && return 0; sleep 0.5; done
  echo "ensure-brokers: $name is not accepting connections on 127.0.0.1:$port" >&2
  exit 1
}

missing=()
command -v rabbitmq-server >/dev/null 2>&1 || missing+=(rabbitmq-server)
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || missing+=(nats-server)
if [ ${#missing[@]} -gt 0 ]; then
  echo "ensure-brokers: installing ${missing[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The packages' own start scripts need systemd, which is not here: we start them below.
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || true
  command -v rabbitmq-server >/dev/null 2>&1 || { echo "ensure-brokers: rabbitmq-server did not install" >&2; exit 1; }
  [ -x /usr/sbin/nats-server ] || command -v nats-server >/dev/null 2>&1 || { echo "ensure-brokers: nats-server did not install" >&2; exit 1; }
fi

if ! listening 5672; then
  echo "ensure-brokers: starting RabbitMQ"
  rabbitmq-server -detached
  wait_for 5672 RabbitMQ
fi

if ! listening 4222; then
  echo "ensure-brokers: starting NATS with JetStream"
  nats=$(command -v nats-server || echo /usr/sbin/nats-server)
  mkdir -p /var/lib/nats-server /var/log
  start-stop-daemon --start --oknodo --background --exec "$nats" -- \
    -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  wait_for 4222 "NATS"
fi
