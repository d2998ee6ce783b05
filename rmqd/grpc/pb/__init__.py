"""protoc output for rmqd/grpc/proto (apache.rocketmq.v2): the build generates the modules here (scripts/gen_grpc.py)."""
